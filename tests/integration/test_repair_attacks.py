"""Hostile patches in PlannerEnv with the patch screen and the runtime guard OFF, so the sandbox alone has to hold: each attack
is contained and reported, nothing is left running, and the next reset restores the working copy."""

from __future__ import annotations

import socket
import threading
import uuid
from pathlib import Path

import psutil
import pytest

from graph_planner.corpus.fetch import git
from graph_planner.env import EnvLimits, PlannerEnv
from graph_planner.tasks import load_tasks
from sandbox.uids import _UID_RANGE

from .repair_fixture import build_minilib

# Counts every process in the sandbox UID range machine-wide: run after the parallel phase, alone.
pytestmark = pytest.mark.serial


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    return build_minilib(tmp_path_factory.mktemp("attacks"), kinds=["binop"])


@pytest.fixture
def env():
    # origin "menu": the sandbox under the static path is under test (model text would never run here)
    limits = EnvLimits(test_cpu_s=5, screen_patches=False, guard_patches=False, target_patches=False)
    e = PlannerEnv(limits=limits, origin="menu")
    yield e
    e.runtime.close()


def _attack(env: PlannerEnv, task, body: str) -> dict:
    """Replace clamp (called by every test) with `body` and submit; returns Submit's test observation."""
    env.reset(task)
    head = env._read_base("minilib/core.py").split("def mean")[0]
    hostile = "def clamp(x, lo, hi):\n" + "".join(f"    {line}\n" for line in body.strip().splitlines()) + "\n\n"
    obs, _, _, _ = env.step(
        {"type": "repair", "apply": False, "edits": [{"file": "minilib/core.py", "old": head, "new": hostile}]}
    )
    assert obs["applied"], obs
    obs, reward, done, _ = env.step({"type": "submit"})
    assert done and reward == 0.0 and not obs["resolved"]
    return obs["tests"]


def _sandbox_processes() -> list[psutil.Process]:
    return [
        p
        for p in psutil.process_iter(["uids"])
        if p.info["uids"] and _UID_RANGE[0] <= p.info["uids"].real < _UID_RANGE[1]
    ]


def _restored(env: PlannerEnv, task) -> bool:
    work = env.runtime.reset(task)
    tracked = set(git(task.repo_dir, "ls-tree", "-r", "--name-only", task.base_commit).splitlines())
    present = {p.relative_to(work).as_posix() for p in work.rglob("*") if p.is_file()}
    same = all((work / f).read_text() == env._read_base(f) for f in tracked if f.endswith(".py"))
    return present == tracked and same


def test_infinite_loop_and_fork_bomb_are_killed_with_nothing_left(corpus, env):
    task = load_tasks(corpus)[0]
    loop = _attack(env, task, "while True:\n    pass")
    assert loop["status"] == "timeout" and loop["seconds"] < 5 + 5
    bomb = _attack(env, task, "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass")
    # The CPU limit counts the whole run, not each forked process: the bomb ends well before the wall-clock
    # backstop (4x the limit, 20 s). Not 10 s: thousands of forks share the cores with the rest of a loaded
    # machine, so 5 CPU seconds took 12.6 s of wall time there.
    assert bomb["status"] in ("timeout", "killed", "ok") and bomb["seconds"] < 16
    assert _sandbox_processes() == []
    assert _restored(env, task)


def test_ten_gigabyte_allocation_is_a_memory_error(corpus, env):
    task = load_tasks(corpus)[0]
    result = _attack(env, task, "blob = bytearray(10 * 1024 ** 3)\nreturn x")
    assert "MemoryError" in result["tail"] or result["status"] == "memory"
    assert psutil.virtual_memory().available > 2 * 1024**3


def test_no_socket_reaches_a_loopback_server(corpus, env):
    task = load_tasks(corpus)[0]
    server = socket.create_server(("127.0.0.1", 0))
    port, accepted = server.getsockname()[1], []
    server.settimeout(0.2)
    done = threading.Event()

    def accept():
        # Listen for as long as the attack runs (a connection can only come from it), plus one last poll.
        while True:
            finished = done.is_set()
            try:
                accepted.append(server.accept())
            except OSError:
                pass
            if finished:
                return

    t = threading.Thread(target=accept, daemon=True)
    t.start()
    result = _attack(
        env,
        task,
        f"import socket\ns = socket.create_connection(('127.0.0.1', {port}), timeout=2)\n"
        "raise RuntimeError('LEAK:connected')",
    )
    done.set()
    t.join()
    server.close()
    assert accepted == [] and "LEAK:connected" not in result["tail"]


def test_files_outside_the_copy_and_api_keys_stay_out_of_reach(corpus, env, monkeypatch):
    task = load_tasks(corpus)[0]
    canary = f"canary-{uuid.uuid4().hex}"
    monkeypatch.setenv("OPENAI_API_KEY", f"sk-{canary}")
    env.reset(task)
    beside = env.runtime.root / "secret.txt"  # ../secret.txt seen from the working copy
    beside.write_text(canary)
    home = Path.home() / f".planact-secret-{canary[:12]}"
    home.write_text(canary)
    planted = [env.runtime.root / "planted.txt", Path("/tmp") / f"planted-{canary}", Path.home() / f"planted-{canary}"]
    try:
        result = _attack(
            env,
            task,
            f'''
import os
seen = []
for path in ("../secret.txt", os.path.expanduser("~/{home.name}"), "{home}", "{beside}"):
    try:
        seen.append(open(path).read())
    except OSError as e:
        seen.append(type(e).__name__)
for path in {[str(p) for p in planted]!r}:
    try:
        open(path, "w").write("x")
    except OSError as e:
        seen.append(type(e).__name__)
seen.append(os.environ.get("OPENAI_API_KEY", "no-key"))
raise RuntimeError("LEAK:" + repr(seen))''',
        )
        assert "LEAK:" in result["tail"]  # the code ran...
        assert canary not in result["tail"]  # ...and saw neither file nor key
        assert not any(p.exists() for p in planted)
        assert _restored(env, task)
    finally:
        home.unlink(missing_ok=True)
