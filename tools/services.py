"""Real Prefect and MLflow servers on free loopback ports, for the tests and the benchmarks that need them.

    proc, url = start_prefect(home)            # `prefect server start`, its own PREFECT_HOME; url ends in /api
    proc, uri = start_mlflow(root)             # `mlflow server`, SQLite store and artifacts under root
    ...
    stop(proc)                                 # the server and everything it started

Each start waits for the server's health URL (and fails early, naming the log, if the process exits).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import psutil

from planact.reaper import start_ticks

BIN = Path(sys.executable).parent
# Prefect server loop services nothing here needs (no active schedule, automation, pause or lease): idle,
# a server spent 2.5% of a core on them, ~1.5 CPU-min over a test suite run. The services that record
# task runs and events (what the UI, the tests and the benchmarks read) stay on.
IDLE_PREFECT_SERVICES = (
    "SCHEDULER",
    "LATE_RUNS",
    "PAUSE_EXPIRATIONS",
    "CANCELLATION_CLEANUP",
    "FOREMAN",
    "TRIGGERS",
    "REPOSSESSOR",
    "DB_VACUUM",
    "CLEANUP_RECONCILER",
    "EVENT_LOGGER",
)


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_http(url: str, timeout: float, proc: subprocess.Popen | None = None) -> None:
    """Poll `url` until it answers 200 (fail early if `proc` exits)."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"{url}: server exited with {proc.returncode}")
        try:
            with urllib.request.urlopen(url, timeout=2) as r:
                if r.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.3)
    raise TimeoutError(f"{url} not ready after {timeout}s")


def kill_tree(pid: int, sig: int = signal.SIGKILL) -> None:
    """Signal a process and every descendant (Ray and Prefect spawn helpers)."""
    try:
        root = psutil.Process(pid)
        procs = root.children(recursive=True) + [root]
    except psutil.NoSuchProcess:
        return
    for p in procs:
        try:
            p.send_signal(sig)
        except psutil.NoSuchProcess:
            pass
    psutil.wait_procs(procs, timeout=10)


def stop(proc: subprocess.Popen | int) -> None:
    """SIGTERM (then SIGINT, then SIGKILL) a server, given as its Popen or its PID, then kill what it started."""
    pid = proc if isinstance(proc, int) else proc.pid
    try:
        root = psutil.Process(pid)
        kids = root.children(recursive=True)
    except psutil.NoSuchProcess:
        return
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGKILL):
        try:
            root.send_signal(sig)
            root.wait(timeout=10 if sig == signal.SIGTERM else 5)
            break
        except psutil.NoSuchProcess:
            break
        except psutil.TimeoutExpired:
            continue
    if not isinstance(proc, int):
        proc.poll()  # reap it
    for k in kids:
        try:
            k.kill()
        except psutil.NoSuchProcess:
            pass


def _serve(args: list[str], env: dict[str, str], health: str, log: Path) -> subprocess.Popen:
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "a") as out:  # the child holds its own copy of the descriptor
        proc = subprocess.Popen(args, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        wait_http(health, 90, proc)
    except (RuntimeError, TimeoutError) as e:
        stop(proc)
        raise RuntimeError(f"{e} (its log: {log})") from e
    return proc


def start_prefect(home: Path, port: int | None = None, ui: bool = False) -> tuple[subprocess.Popen, str]:
    """A Prefect server with its own PREFECT_HOME (log: home/server.log); returns it and its API URL."""
    port = port or free_port()
    url = f"http://127.0.0.1:{port}/api"
    from flows.runtime import server_env  # batched task-run recording, as a run's own server has

    env = {
        **server_env(dict(os.environ)),
        "PREFECT_HOME": str(home),
        "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
        "PREFECT_UI_ENABLED": "true" if ui else "false",
        "PREFECT_UI_API_URL": url,
        **{f"PREFECT_SERVER_SERVICES_{s}_ENABLED": "false" for s in IDLE_PREFECT_SERVICES},
    }
    env.pop("PREFECT_API_URL", None)  # the server's own settings, not a client's
    args = [str(BIN / "prefect"), "server", "start", "--host", "127.0.0.1", "--port", str(port)]
    return _serve(args, env, url + "/health", Path(home) / "server.log"), url


def start_mlflow(root: Path, port: int | None = None, artifacts: Path | None = None) -> tuple[subprocess.Popen, str]:
    """An MLflow tracking server over root/mlflow.db, artifacts in `artifacts` (default root/artifacts), one
    worker (log: root/server.log); returns it and its URI."""
    port = port or free_port()
    args = [
        str(BIN / "mlflow"),
        "server",
        "--backend-store-uri",
        f"sqlite:///{Path(root) / 'mlflow.db'}",
        "--artifacts-destination",
        str(artifacts or Path(root) / "artifacts"),
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--workers",
        "1",
    ]
    env = {**os.environ, "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"}
    uri = f"http://127.0.0.1:{port}"
    return _serve(args, env, uri + "/health", Path(root) / "server.log"), uri


# One server of each kind for a whole pytest run: pytest-xdist workers are separate processes, and each
# starting its own Prefect and MLflow server cost ~13 and ~9 CPU-s to start plus ~1.5% of a core idle,
# per worker. The run's owner (the xdist controller, or pytest alone) names a folder in SHARED_ENV; the
# first worker that needs a server starts it, in its own session, and records it there; the others reuse
# it; the owner stops every recorded server when the run ends (stop_shared).
SHARED_ENV = "PLANACT_TEST_SERVICES"


def shared(name: str, start) -> str:
    """The URL of the run's shared server `name`, started by `start(folder) -> (proc, url)` if none is up."""
    from filelock import FileLock

    folder = Path(os.environ[SHARED_ENV])
    record = folder / f"{name}.json"
    with FileLock(str(folder / f"{name}.lock")):
        if record.exists():
            info = json.loads(record.read_text())
            if _alive(info):
                return info["url"]
        home = folder / name
        home.mkdir(exist_ok=True)
        proc, url = start(home)
        # told apart from a later process given the same PID
        record.write_text(json.dumps({"pid": proc.pid, "url": url, "started": start_ticks(proc.pid)}))
        return url


def stop_shared(folder: Path) -> None:
    """Stop every server recorded in `folder` by `shared`."""
    for record in Path(folder).glob("*.json"):
        info = json.loads(record.read_text())
        if _alive(info):
            stop(info["pid"])


def _alive(info: dict) -> bool:
    try:
        started = start_ticks(info["pid"])
        return (
            started is not None
            and started == info.get("started")
            and psutil.Process(info["pid"]).status() != psutil.STATUS_ZOMBIE
        )
    except psutil.NoSuchProcess:
        return False
