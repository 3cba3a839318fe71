"""Real services for integration tests, on free loopback ports, always stopped by PID afterwards.

* a Prefect server (`prefect server start`, its own PREFECT_HOME) and an MLflow tracking server (`mlflow
  server`, SQLite backend, one worker), one of each for the whole pytest run (tools/services.py `shared`;
  tests/conftest.py stops them when the run ends),
* a Ray head started with `ray start --head` (own --temp-dir, loopback only),
* helpers to run the training CLI as a subprocess and to kill a whole process tree.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

from tools.services import SHARED_ENV, free_port, kill_tree, shared, start_mlflow, start_prefect, stop, wait_http  # noqa: F401

REPO = Path(__file__).resolve().parents[2]
PY = sys.executable
BIN = Path(PY).parent
# Keep every Ray process of the tests on loopback (Ray otherwise binds the primary interface).
LOOPBACK_RAY = {"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0", "RAY_USAGE_STATS_ENABLED": "0"}
# Ray's setting for clusters the tests start and runs join by address (see ray_head).
NO_PRESTART = {"prestart_worker_first_driver": False}


@pytest.fixture(scope="session")
def prefect_api():
    """The run's real Prefect server (shared by the xdist workers); yields its API URL and exports it for
    this process and its children."""
    # The UI is on: a test opens a finished flow run's page in a real browser (test_deployments.py, the end-to-end twin).
    url = shared("prefect", lambda home: start_prefect(home, ui=True))
    home = Path(os.environ[SHARED_ENV]) / "prefect"
    old = {k: os.environ.get(k) for k in ("PREFECT_API_URL", "PREFECT_HOME")}
    try:
        os.environ["PREFECT_API_URL"] = url
        os.environ["PREFECT_HOME"] = str(home)
        yield url
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


@pytest.fixture(scope="session")
def mlflow_server():
    """The run's real MLflow tracking server (SQLite backend, one worker; shared by the xdist workers)."""
    return shared("mlflow", start_mlflow)


@pytest.fixture
def ray_head(tmp_path):
    """A Ray head node started with `ray start --head` on loopback; yields its address; killed by PID after."""
    temp = Path("/tmp") / f"pa-ray-{os.getpid()}-{free_port()}"  # short: Ray's socket paths have a length limit
    port = free_port()
    env = {**os.environ, **LOOPBACK_RAY}
    out = subprocess.run(
        [
            str(BIN / "ray"),
            "start",
            "--head",
            "--port",
            str(port),
            "--num-cpus",
            "4",
            "--temp-dir",
            str(temp),
            "--include-dashboard=false",
            "--disable-usage-stats",
            # No workers started ahead for a connecting driver: the runs that join by address bring a
            # runtime_env (the variables their workers must share), so no prestarted worker could serve them
            # and each sat idle until the head stopped (~2 a driver, 2-4 CPU-s each importing Ray).
            f"--system-config={json.dumps(NO_PRESTART)}",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    try:
        yield f"127.0.0.1:{port}"
    finally:
        for p in psutil.process_iter(["pid", "cmdline"]):
            if p.info["pid"] != os.getpid() and any(str(temp) in (c or "") for c in (p.info["cmdline"] or [])):
                try:
                    p.kill()
                except psutil.NoSuchProcess:
                    pass
        subprocess.run(["rm", "-rf", str(temp)], check=False)


def cli_env(**extra: str) -> dict[str, str]:
    """Environment for a training subprocess: the test's Prefect API, loopback Ray, no PYTHONPATH tricks."""
    env = {**os.environ, **LOOPBACK_RAY, "PREFECT_SERVER_ANALYTICS_ENABLED": "false", "TOKENIZERS_PARALLELISM": "false"}
    env.pop("PYTHONPATH", None)
    env.update(extra)
    return env


def token_env() -> dict[str, str]:
    """cli_env for drivers that join a `ray start` cluster by ip:port (Ray 2.60 requires token auth there).

    Built when called, never at import: the prefect_api fixture exports the API URL only when it starts.
    """
    return cli_env(RAY_AUTH_MODE="token")


def start_cli(
    args: list[str], log_path: Path, env: dict | None = None, cwd: Path | None = None, module: str = "flows.plan_act"
) -> subprocess.Popen:
    """Start `python -m <module> ARGS` (the training CLI by default) in its own session, output to log_path."""
    log = open(log_path, "w")
    return subprocess.Popen(
        [PY, "-m", module, *args],
        env=env or cli_env(),
        cwd=str(cwd or REPO),
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )


def run_script(*args: str, timeout: int, env: dict | None = None) -> subprocess.CompletedProcess:
    """`python *args` from the repository root (a benchmark's tiny mode, a tool); fails with its output."""
    out = subprocess.run([PY, *args], cwd=REPO, capture_output=True, text=True, timeout=timeout, env=env or cli_env())
    assert out.returncode == 0, (out.stdout + out.stderr)[-3000:]
    return out


def run_cli(args: list[str], log_path: Path, timeout: float = 600, **kw) -> tuple[int, str]:
    """Run the training CLI to completion; returns (exit code, output)."""
    proc = start_cli(args, log_path, **kw)
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        kill_tree(proc.pid)
        raise
    finally:
        kill_tree(proc.pid)  # nothing it started may outlive it
    return proc.returncode, log_path.read_text()


def read_state(run_dir: Path, role: str = "both") -> dict:
    """The run's state file, or {} when not written yet."""
    p = run_dir / ("state.json" if role == "both" else f"state-{role}.json")
    try:
        return json.loads(p.read_text())
    except (OSError, json.JSONDecodeError):
        return {}


SMOKE = str(REPO / "configs" / "smoke.yaml")


def smoke_args(root, *overrides: str, config: str = SMOKE) -> list[str]:
    """CLI arguments of a smoke run under `root`: `--config C --set checkpoint.root=ROOT --set o ...`."""
    args = ["--config", config, "--set", f"checkpoint.root={root}"]
    for o in overrides:
        args += ["--set", o]
    return args


def shared_tmp(tmp_path_factory, name: str) -> Path:
    """A folder shared by all pytest-xdist workers of this run (the worker's own temp folder without xdist)."""
    base = tmp_path_factory.getbasetemp()
    root = (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / name
    root.mkdir(parents=True, exist_ok=True)
    return root


@pytest.fixture(scope="session")
def aflow_executor(tmp_path_factory) -> str:
    """A planner+actor checkpoint for the offline AFlow benchmark: the one shipped in tests/data (tools/aflow_executor.py
    says how it was made), copied to a folder of this run; built here only when the code that decides its weights
    has changed since (tests/unit/test_shipped_executor.py fails then, so that it is rebuilt and shipped)."""
    from filelock import FileLock

    from aflow_rl.executor import executor_fingerprint
    from tools.aflow_executor import SHIPPED, STEPS, build

    # Under pytest-xdist every worker has its own session: one copy (or build) in the folder the workers share.
    root = shared_tmp(tmp_path_factory, "aflow-executor")
    with FileLock(str(root / ".lock")):
        folder = root / "executor"
        if not (folder / "fingerprint.txt").is_file():
            shipped = (SHIPPED / "fingerprint.txt").read_text().strip()
            if shipped == executor_fingerprint(*STEPS):
                shutil.copytree(SHIPPED, folder)
            else:
                build(folder)  # ~80-100 CPU-s with one torch thread (the other xdist worker has the second core)
        return str(folder)
