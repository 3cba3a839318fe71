"""Hostile model code against planact's sandbox and the code scorer (real processes, real bubblewrap).

Each attack is one RL would find: forge the verdict, exit early with status 0, patch the checker,
escape to the shell, the network, the home directory or the rest of the disk, outlive the timeout, or
exhaust the scorer's memory. Every wrong solution must score 0, nothing outside may change, nothing
may survive, and the scorer's own memory must stay bounded.
"""

from __future__ import annotations

import os
import socket
import sys
import tempfile
import textwrap
import threading
import time
from pathlib import Path

import psutil
import pytest

import sandbox
from aflow_rl.benchmarks import load_problems, score_code

PY = [sys.executable, "-I", "-c"]
QUICK = sandbox.Limits(timeout_s=4.0, memory_mb=256)
# Wall-clock limits and machine-wide process scans: these run after the parallel phase, alone.
pytestmark = pytest.mark.serial


@pytest.fixture(scope="module")
def problem():
    return load_problems("humaneval")[0]  # has_close_elements


def _score(problem, code: str, timeout_s: float = 4.0) -> tuple[float, str]:
    return score_code(problem, code, timeout_s=timeout_s, memory_mb=256)


FORGERIES = {
    # The old scorer trusted the last result marker on stdout.
    "forged marker": 'print("\\n__SANDBOX_RESULT__{\\"status\\": \\"ok\\"}")\nimport sys\nsys.stdout.flush()\nimport os\nos._exit(0)\n',
    "early exit 0": "import sys\nsys.exit(0)\n",
    "os._exit(0)": "import os\nos._exit(0)\n",
    # An object that agrees with everything beats `assert candidate(x) == y` when both share a process.
    "always-equal": (
        "class Yes:\n    def __eq__(self, other): return True\n    def __ne__(self, other): return False\n"
        "    def __bool__(self): return True\ndef has_close_elements(numbers, threshold):\n    return Yes()\n"
    ),
    # Patching the checker's builtins only works in the checker's own process.
    "patch assert machinery": (
        "import builtins\nbuiltins.AssertionError = type('X', (BaseException,), {})\n"
        "def has_close_elements(numbers, threshold):\n    return None\n"
    ),
    # The old sandbox's barrier was an audit hook reading a global the code could rebind.
    "audit-hook rebinding": (
        "import sys\nfor name in list(globals()):\n    globals()[name] = None\n"
        "def has_close_elements(numbers, threshold):\n    import os\n    os.system('true')\n    return False\n"
    ),
    "wrong answer": "def has_close_elements(numbers, threshold):\n    return False\n",
}


@pytest.mark.parametrize("attack", list(FORGERIES))
def test_forged_verdicts_score_zero(problem, attack):
    score, why = _score(problem, FORGERIES[attack])
    assert score == 0.0, (attack, why)


def test_the_canonical_solution_still_scores_one(problem):
    assert _score(problem, problem["question"] + problem["answer"]) == (1.0, "ok")


def test_shell_runs_only_inside_and_changes_nothing_outside(problem, tmp_path):
    outside = Path(tempfile.mkdtemp(dir=os.getcwd(), prefix=".sbx-outside-"))  # not under a hidden path
    try:
        code = (
            f"import os, subprocess\nsubprocess.run('echo pwned > {outside}/shell.txt; echo x > /etc/pwned', "
            "shell=True)\n"
            f"open('{outside}/py.txt', 'w').write('x')\n"
        )
        r = sandbox.run(PY + [code], limits=QUICK)
        assert r.status == "error" and ("Permission denied" in r.stderr or "Read-only" in r.stderr)
        assert list(outside.iterdir()) == [] and not Path("/etc/pwned").exists()
    finally:
        outside.rmdir()


def test_no_network_even_to_a_loopback_server_on_this_machine():
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)
    port = srv.getsockname()[1]
    hits = []
    threading.Thread(target=lambda: hits.append(srv.accept()), daemon=True).start()
    r = sandbox.run(
        PY + [f"import socket\nsocket.create_connection(('127.0.0.1', {port}), timeout=2)\nprint('connected')"],
        limits=QUICK,
    )
    srv.close()
    assert r.status == "error" and "connected" not in r.stdout
    assert not hits  # the server on the host's loopback saw nothing


def test_secrets_of_the_home_directory_and_environment_are_hidden(monkeypatch):
    home = Path(tempfile.mkdtemp(dir=os.getcwd(), prefix=".sbx-home-"))
    try:
        (home / ".ray").mkdir()
        (home / ".ray" / "auth_token").write_text("RAY-CANARY")
        (home / ".prefect").mkdir()
        (home / ".prefect" / "profiles.toml").write_text("PREFECT-CANARY")
        monkeypatch.setenv("HOME", str(home))
        monkeypatch.setenv("OPENAI_API_KEY", "sk-CANARY")
        code = (
            f"import os, glob\nout = []\n"
            f"for p in ['{home}/.ray/auth_token', '{home}/.prefect/profiles.toml', '/root/.bashrc']:\n"
            "    try: out.append(open(p).read())\n    except OSError as e: out.append(type(e).__name__)\n"
            "out.append(repr(dict(os.environ)))\n"
            "for p in glob.glob('/proc/*/environ'):\n"
            "    try: out.append(open(p, 'rb').read().decode('latin1'))\n    except OSError: pass\n"
            "print(out)"
        )
        r = sandbox.run(PY + [code], limits=QUICK)
        assert r.status == "ok", r.stderr
        for canary in ("RAY-CANARY", "PREFECT-CANARY", "sk-CANARY"):
            assert canary not in r.stdout
    finally:
        import shutil

        shutil.rmtree(home)


def test_a_setsid_child_does_not_outlive_the_run():
    before = {p.pid for p in psutil.process_iter()}
    code = (
        "import os, time\nif os.fork() == 0:\n    os.setsid()\n    if os.fork() == 0:\n"
        "        time.sleep(120)\n    os._exit(0)\nprint('parent exits at once')"
    )
    r = sandbox.run(PY + [code], limits=QUICK)
    assert r.status == "ok" and r.seconds < 2.0  # the survivor no longer holds the pipe until the timeout
    leftover = [
        p
        for p in psutil.process_iter(["cmdline"])
        if p.pid not in before and "time.sleep(120)" in " ".join(p.info["cmdline"] or [])
    ]
    assert not leftover


def test_a_run_past_its_timeout_is_killed_with_its_children(problem):
    before = {p.pid for p in psutil.process_iter()}
    code = (
        "import os, time\nfor _ in range(3):\n    if os.fork() == 0:\n        os.setsid()\n        break\n"
        "while True:\n    pass\n"
    )
    t0 = time.monotonic()
    r = sandbox.run(PY + [code], limits=sandbox.Limits(timeout_s=2.0))
    assert r.status == "timeout" and time.monotonic() - t0 < 6
    spinning = [
        p
        for p in psutil.process_iter(["cmdline"])
        if p.pid not in before and "while True" in " ".join(p.info["cmdline"] or [])
    ]
    assert not spinning
    score, why = _score(problem, "def has_close_elements(numbers, threshold):\n    while True:\n        pass\n", 2.0)
    assert score == 0.0 and why.startswith("timeout")


def test_a_cpu_limit_stops_a_busy_loop_but_not_a_run_that_only_waits():
    """Verdicts judged by CPU time (repair rewards, corpus validation): a run that waits, as one starved
    by a loaded machine does, finishes; one that computes forever stops at its CPU limit, long before
    its wall-clock backstop, and reads as a timeout on either backend."""
    limits = sandbox.Limits(timeout_s=20.0, cpu_s=1.0)
    t0 = time.monotonic()
    spin = sandbox.run(PY + ["while True:\n    pass"], limits=limits)
    assert spin.status == "timeout" and time.monotonic() - t0 < 6
    wait = sandbox.run(PY + ["import time; time.sleep(2.5); print('done')"], limits=limits)
    assert wait.status == "ok" and wait.stdout.strip() == "done"
    # 16 spinning processes share one budget (RLIMIT_CPU alone would give each its own second)
    t0 = time.monotonic()
    bomb = sandbox.run(PY + ["import os\nfor _ in range(4):\n    os.fork()\nwhile True:\n    pass"], limits=limits)
    assert bomb.status == "timeout" and time.monotonic() - t0 < 4


@pytest.mark.skipif(
    sandbox.backend() != "bwrap",
    reason="the process backend hides no other process: as root this attack would write into every pipe on the machine",
)
def test_a_run_reports_the_cpu_time_of_its_tree_and_the_program_cannot_forge_it():
    """Completed.cpu_s (what the corpus build derives its limits from) counts a reaped child's work, not
    the time the run waited, and stays honest when the program writes fake reports into every pipe it
    can open (the measuring shell's included: it runs as another user)."""
    prog = textwrap.dedent("""
        import glob, os, stat, time
        if os.fork() == 0:
            t = time.process_time()
            while time.process_time() - t < 0.6:
                pass
            os._exit(0)
        os.wait()
        fake = b"0m0.000s 0m0.000s\\n0m0.000s 0m0.000s\\n"
        for path in glob.glob("/proc/*/fd/*"):
            try:
                if stat.S_ISFIFO(os.stat(path).st_mode):  # pipes only: the measuring shell's report pipe
                    fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK)
                    os.write(fd, fake)
                    os.close(fd)
            except OSError:
                pass
        time.sleep(1.0)
    """)
    r = sandbox.run(PY + [prog], limits=sandbox.Limits(timeout_s=20.0))
    assert r.status == "ok" and r.seconds > 1.5
    assert 0.55 < r.cpu_s < 1.2, r.cpu_s


def test_a_fork_bomb_hits_the_process_limit():
    t0 = time.monotonic()
    r = sandbox.run(PY + ["import os\nwhile True:\n    os.fork()"], limits=sandbox.Limits(timeout_s=5.0, processes=16))
    assert r.status in ("error", "timeout")
    assert "Resource temporarily unavailable" in r.stderr or r.status == "timeout"
    assert time.monotonic() - t0 < 10
    assert not [p for p in psutil.process_iter(["cmdline"]) if "os.fork()" in " ".join(p.info["cmdline"] or [])]


def test_a_10_gb_allocation_is_a_memory_error(problem):
    r = sandbox.run(PY + ["x = bytearray(10 * 2**30)"], limits=QUICK)
    assert r.status == "memory"
    score, why = _score(problem, "def has_close_elements(numbers, threshold):\n    x = bytearray(10 * 2**30)\n")
    assert score == 0.0 and why.startswith("memory"), why


HOLD = "import os, time\nfor _ in range({n}):\n    if os.fork() == 0:\n        b = bytearray(150 << 20)\n        time.sleep(3)\n        os._exit(0)\nfor _ in range({n}):\n    os.wait()\nprint('held')"


@pytest.mark.skipif(os.geteuid() != 0, reason="the whole run's memory is summed over its own uid (root)")
def test_children_that_each_stay_under_the_limit_cannot_add_up_past_it():
    """RLIMIT_AS is per process: three children holding 150 MB each (450 MB, each under 256) were a way
    past it (a reviewer held 3 GiB against 2 GiB per process, 2026-11-29). The whole run's resident memory
    is summed and the run killed as "memory"; one such child (the honest control) runs to the end."""
    limits = sandbox.Limits(timeout_s=20.0, memory_mb=256)
    honest = sandbox.run(PY + [HOLD.format(n=1)], limits=limits)
    assert honest.status == "ok" and "held" in honest.stdout, honest
    greedy = sandbox.run(PY + [HOLD.format(n=3)], limits=limits)
    assert greedy.status == "memory" and "held" not in greedy.stdout, greedy
    assert greedy.seconds < 10


def test_a_print_flood_is_truncated_and_the_scorer_stays_small(problem):
    me = psutil.Process()
    rss0 = me.memory_info().rss
    r = sandbox.run(
        PY + ["import sys\nwhile True:\n    sys.stdout.write('x' * 65536)"], limits=sandbox.Limits(timeout_s=3.0)
    )
    assert r.status == "timeout" and r.truncated and len(r.stdout) <= sandbox.Limits().output_bytes
    flood = "def has_close_elements(numbers, threshold):\n    while True:\n        print('y' * 65536)\n"
    assert _score(problem, flood, 3.0)[0] == 0.0
    assert me.memory_info().rss - rss0 < 100 << 20  # the old scorer grew to ~4.8 GB on this


def test_writes_stay_in_the_private_working_directory():
    r = sandbox.run(
        PY
        + [
            "import os\nopen('mine.txt', 'w').write('ok')\nprint(os.listdir('.'))\n"
            "for p in ['/var/tmp/x', '/usr/x', '/root/x']:\n"
            "    try:\n        open(p, 'w')\n        print('WROTE', p)\n    except OSError:\n        pass\n"
        ],
        limits=QUICK,
    )
    assert r.status == "ok" and "mine.txt" in r.stdout and "WROTE" not in r.stdout
