"""A Plan/Act run survives SIGKILL of its actor-engine agent: the schedulemesh supervisor recreates it
(restored from the last checkpoint), the task that hit the dead agent retries, the run completes.

The run uses a `ray start --head` cluster so that a second driver (a subprocess: Ray reads its auth
settings at import) can ask the run's supervisor where the actor engine lives, kill it and time its
replacement.
"""

from __future__ import annotations

import json
import subprocess
import time

import pytest

from .conftest import PY, REPO, kill_tree, read_state, smoke_args, start_cli, token_env

NS = "recovery-test"
KILLER = """
import json, os, signal, sys, time, psutil, ray
from schedulemesh import Scheduler
ray.init(address=sys.argv[1], namespace=sys.argv[2])
sched = Scheduler(namespace=sys.argv[2])
before = sched.agent_info(sys.argv[3])
# Ray titles an actor process after the method it runs: kill it in the middle of a generate call.
proc = psutil.Process(before["pid"])
while "generate" not in " ".join(proc.cmdline()):
    time.sleep(0.005)
t0 = time.perf_counter()
os.kill(before["pid"], signal.SIGKILL)
after = sched.wait_alive(sys.argv[3], min_incarnation=1, timeout_s=120)
print("RESULT " + json.dumps({"before": before["pid"], "after": after["pid"], "recreations": after["recreations"],
                              "seconds": time.perf_counter() - t0}))
"""


@pytest.mark.slow
def test_run_survives_sigkill_of_its_actor_engine(prefect_api, ray_head, tmp_path):
    env = token_env()
    args = smoke_args(
        tmp_path,
        "run_name=kill",
        "rounds=6",
        f"ray.address={ray_head}",
        f"barrier.namespace={NS}",
        "env.tasks_per_round=32",
    )  # rounds long enough that the kill lands inside one
    proc = start_cli(args, tmp_path / "cli.log", env=env)
    try:
        deadline = time.time() + 300
        while read_state(tmp_path / "kill").get("last_completed_round", -1) < 2:
            assert proc.poll() is None and time.time() < deadline, (tmp_path / "cli.log").read_text()[-3000:]
            time.sleep(0.2)
        killed_after = read_state(tmp_path / "kill")["last_completed_round"]
        out = subprocess.run(
            [PY, "-c", KILLER, ray_head, NS, "kill:actor:0"],
            cwd=REPO,
            env=env,
            capture_output=True,
            text=True,
            timeout=180,
        )
        assert out.returncode == 0, out.stderr[-3000:]
        kill = json.loads(next(ln for ln in out.stdout.splitlines() if ln.startswith("RESULT "))[7:])
        print(
            f"\nactor engine (pid {kill['before']}) killed mid-generate after round {killed_after}; recreated as pid "
            f"{kill['after']} and answering after {kill['seconds']:.2f}s"
        )
        assert proc.wait(timeout=300) == 0, (tmp_path / "cli.log").read_text()[-4000:]
    finally:
        kill_tree(proc.pid)
    log = (tmp_path / "cli.log").read_text()
    state = read_state(tmp_path / "kill")
    assert state["last_completed_round"] == 6
    assert [row["round"] for row in state["table"]] == [1, 2, 3, 4, 5, 6]
    assert kill["after"] != kill["before"] and kill["recreations"] == 1
    assert "Retry 1/2" in log  # the task that was talking to the killed engine ran again
