"""Run model-written code in a separate process: wall-clock timeout, CPU and memory rlimits, no network.

The child is a fresh `python -I` in its own session (so a timeout kills its whole process group),
with RLIMIT_AS / RLIMIT_CPU / RLIMIT_FSIZE set before it starts, and an audit hook, installed
before the code runs and impossible to remove from Python, that refuses sockets, subprocesses,
exec and fork. Results come back as one JSON line on stdout after a marker, so whatever the code
prints cannot be mistaken for its result.
"""

from __future__ import annotations

import json
import os
import resource
import signal
import subprocess
import sys
from dataclasses import dataclass

MARKER = "__SANDBOX_RESULT__"

_BOOTSTRAP = r'''
import json, sys
_BLOCKED = ("socket.", "subprocess.Popen", "os.system", "os.exec", "os.posix_spawn", "os.spawn", "os.fork",
            "os.forkpty", "pty.spawn", "ctypes.dlopen")
def _hook(event, args):
    if event.startswith(_BLOCKED):
        raise PermissionError(f"sandbox: {event} is not allowed")
src = sys.stdin.read()
payload = json.loads(src)
sys.addaudithook(_hook)
ns = {"__name__": "__sandbox__"}
try:
    exec(compile(payload["code"], "<model code>", "exec"), ns)
    value = None
    if payload.get("call"):
        value = ns[payload["call"]]()
    out = {"status": "ok", "value": repr(value) if value is not None else None}
except MemoryError:
    out = {"status": "memory", "error": "MemoryError"}
except BaseException as e:
    out = {"status": "error", "error": f"{type(e).__name__}: {e}"[:2000]}
sys.stdout.write("\n''' + MARKER + r'''" + json.dumps(out) + "\n")
sys.stdout.flush()
'''


@dataclass
class RunResult:
    """What the sandboxed code did: status ok | error | timeout | memory, its value (repr) or error, its output."""

    status: str
    value: str | None = None
    error: str | None = None
    stdout: str = ""

    @property
    def ok(self) -> bool:
        """True when the code ran to the end without raising."""
        return self.status == "ok"


def _limits(memory_mb: int, cpu_s: int):
    def apply() -> None:
        mem = memory_mb * 1024 * 1024
        resource.setrlimit(resource.RLIMIT_AS, (mem, mem))
        resource.setrlimit(resource.RLIMIT_CPU, (cpu_s, cpu_s + 1))
        resource.setrlimit(resource.RLIMIT_FSIZE, (16 << 20, 16 << 20))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    return apply


def run_code(code: str, call: str | None = None, timeout_s: float = 15.0, memory_mb: int = 512) -> RunResult:
    """Execute `code` (then `call()` if named) in a locked-down child; never raises on what the code does."""
    cpu_s = max(1, int(timeout_s) + 1)
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "PYTHONHASHSEED": "0", "OMP_NUM_THREADS": "1"}
    proc = subprocess.Popen([sys.executable, "-I", "-c", _BOOTSTRAP], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=env, start_new_session=True,
                            preexec_fn=_limits(memory_mb, cpu_s), text=True)
    try:
        out, err = proc.communicate(json.dumps({"code": code, "call": call}), timeout=timeout_s)
    except subprocess.TimeoutExpired:
        _kill_group(proc)
        proc.communicate()
        return RunResult("timeout", error=f"timed out after {timeout_s:g} s")
    finally:
        _kill_group(proc)  # anything the code left behind in its group goes too
    head, sep, tail = out.rpartition(MARKER)
    if not sep:
        # Killed by an rlimit (SIGKILL/SIGXCPU) or the interpreter failed before reporting.
        status = "timeout" if proc.returncode in (-signal.SIGXCPU, -signal.SIGKILL) else "error"
        if "MemoryError" in err or "Cannot allocate memory" in err:
            status = "memory"
        return RunResult(status, error=(err.strip().splitlines() or [f"exit {proc.returncode}"])[-1][:2000], stdout=out[-2000:])
    res = json.loads(tail.strip().splitlines()[0])
    return RunResult(res["status"], value=res.get("value"), error=res.get("error"), stdout=head[-2000:])


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
