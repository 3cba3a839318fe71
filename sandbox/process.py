"""One OS-level sandbox for every piece of model-written code planact runs.

A sandboxed command runs as a separate process tree with:

* rlimits set before exec: address space, CPU seconds, file size, open files, process count, no core;
* a private working directory (the only writable place besides a small private /tmp);
* no network, and a file system built from an allow-list (`sandbox.view`): the system's
  programs and libraries, the interpreter's standard library, exactly the packages the caller names
  and its working copy; never `/`, the home directory, the project, corpora, caches or the venv;
* an optional channel: a pipe the host opens and alone reads, for results the host trusts more than
  files in the working copy; its descriptor number is in no environment the program can read (the
  host tells the program over stdin, which the program reads once);
* an environment rebuilt from a short allow-list, so API keys and tokens never reach it;
* the whole tree killed on timeout, including children that called `setsid`;
* stdout/stderr read in bounded chunks and truncated, so a print flood cannot grow the caller.

Backends (what holds in each case is in docs/sandbox.md):

* ``bwrap`` (default; Debian's `bubblewrap`): mount, PID, network, IPC and UTS namespaces, an empty
  root holding only the view. As root the program then drops to a fresh
  unprivileged uid (one per run) with no capabilities, so the process limit is per run and file
  permissions protect the host as well; as an ordinary user an unprivileged user namespace does the
  same work. Killing bwrap ends the PID namespace, and the kernel ends every process in it.
* ``process`` (only when asked for with ``PLANACT_SANDBOX=process``): rlimits, a new session whose
  group is killed, and as root a private network namespace. It has no filesystem barrier, and a
  child that calls `setsid` escapes the group kill: it exists for machines without bubblewrap.

The audit hooks some callers add inside the child are a second line, never the boundary.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from sandbox.child import (  # noqa: F401 - Limits, SandboxUnavailable, backend, clean_env: this module's interface
    Limits,
    SandboxUnavailable,
    backend,
    bwrap_argv,
    clean_env,
    measuring_shell,
    set_limits,
)
from sandbox.drain import Drain
from sandbox.uids import (
    _chown_tree,
    _claim_uid,
    _count_user_processes,
    _kill_uid,
    _tree_usage,
    _uid_claim,
)
from sandbox.view import CODE, View, python


@dataclass
class Completed:
    """What a sandboxed run did: exit code (None if killed), status, bounded output, seconds."""

    status: str
    """ok (exit 0) | error (non-zero exit) | timeout (wall-clock or CPU limit) | memory | killed (by a signal)."""
    returncode: int | None
    stdout: str = ""
    stderr: str = ""
    truncated: bool = False
    seconds: float = 0.0
    backend: str = ""
    cpu_s: float | None = None
    """CPU seconds of the program and every descendant it reaped (None when it was killed)."""
    channel: str = ""
    """What the program wrote to the host's channel (run(..., channel=True)), bounded like stdout."""
    channel_truncated: bool = False
    """The program wrote more to the channel than was kept: its last lines are missing."""


def _wait(box: Sandbox, limits: Limits) -> tuple[str, float | None]:
    """Wait for the program: ("timeout", None) when it passed its wall-clock limit, or its CPU limit counted
    over the whole run (a run with its own uid: RLIMIT_CPU alone is per process, so N spinning children
    of a fork bomb would each get the whole budget); ("memory", None) when the whole run's resident memory
    passed `run_memory_mb` (RLIMIT_AS is per process too); else ("", the CPU seconds it used)."""
    whole_run = box.uid is not None
    memory = limits.run_memory_mb or limits.memory_mb
    delay, next_check = 0.0005, 0.0
    while True:
        # wait4 rather than Popen.wait: its rusage is the program's CPU time with every descendant it
        # reaped, a measure of the work a run needs that, unlike seconds, does not grow with the load.
        pid, status, usage = os.wait4(box.proc.pid, os.WNOHANG)
        if pid:
            box.proc.returncode = os.waitstatus_to_exitcode(status)
            return "", box.cpu_seconds(usage.ru_utime + usage.ru_stime)
        now = time.monotonic()
        if now - box.started > limits.timeout_s:
            return "timeout", None
        if whole_run and now >= next_check:
            cpu, rss = _tree_usage(box.uid)  # one pass over /proc for both
            if limits.cpu_s is not None and cpu > limits.cpu_s:
                return "timeout", None
            if rss > memory:
                return "memory", None
            next_check = now + 0.2
        delay = min(2 * delay, 0.05)
        time.sleep(delay)


@dataclass
class Sandbox:
    """A started sandboxed process: `proc` has pipes on stdin/stdout/stderr; `close()` ends its whole tree."""

    proc: subprocess.Popen
    workdir: str
    uid: int | None
    backend: str
    owns_workdir: bool
    started: float = field(default_factory=time.monotonic)
    cpu_pipe: int | None = None
    """Read end of the pipe the bwrap backend's measuring shell reports the program's CPU time on."""

    def cpu_seconds(self, reaped: float) -> float | None:
        """CPU seconds of the finished program and the descendants it reaped: what the measuring shell
        reported (bwrap: the program is not our child), else `reaped` (our child's own rusage)."""
        if self.cpu_pipe is None:
            return reaped
        os.set_blocking(self.cpu_pipe, False)
        try:
            report = os.read(self.cpu_pipe, 4096).decode("ascii", "replace")
        except OSError:
            return None
        times = re.findall(r"(\d+)m([\d.]+)s", report)  # bash's `times`: self user/sys, then children's
        return sum(60 * int(m) + float(sec) for m, sec in times[-2:]) if len(times) == 4 else None

    def kill(self) -> None:
        """End every process of the run (idempotent)."""
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        if self.uid is not None:
            _kill_uid(self.uid)
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:  # pragma: no cover - SIGKILL does not time out in practice
            pass
        if self.uid is not None:
            # SIGKILLed processes linger while the kernel tears them down, and a fork bomb may fork between
            # two kills: return only once the uid runs nothing (a caller counting processes sees none).
            deadline = time.monotonic() + 10
            while _count_user_processes(self.uid) and time.monotonic() < deadline:
                _kill_uid(self.uid)
                time.sleep(0.02)

    def close(self) -> None:
        """Kill the tree and remove a working directory the sandbox created."""
        self.kill()
        if self.cpu_pipe is not None:
            os.close(self.cpu_pipe)
            self.cpu_pipe = None
        if self.owns_workdir:
            shutil.rmtree(self.workdir, ignore_errors=True)
        if self.uid is not None:
            _uid_claim(self.uid).unlink(missing_ok=True)


def start(
    argv: list[str],
    *,
    workdir: str | os.PathLike | None = None,
    limits: Limits = Limits(),
    env: dict[str, str] | None = None,
    read_only: list[str] | tuple = (),
    files: dict[str, str] | None = None,
    view: View = CODE,
    channel_fd: int | None = None,
) -> Sandbox:
    """Start `argv` in the sandbox with pipes on all three streams; the caller must `close()` it.

    Without `workdir` a private temporary one is made (holding `files`) and removed on `close()`. The
    program sees `view` plus the folders in `read_only`; `argv[0]` naming this process's interpreter runs
    the real interpreter behind it (a venv is outside every view). `channel_fd`: the write end of a pipe
    the program inherits under the same number; the number is in no environment variable (an initial
    environment stays readable in /proc/self/environ), so the caller tells the program some other way.
    """
    kind = backend()
    owns = workdir is None
    work = tempfile.mkdtemp(prefix="planact-sbx-") if owns else os.fspath(Path(workdir).resolve())
    for name, text in (files or {}).items():
        Path(work, name).write_text(text)
    if argv and argv[0] == sys.executable:
        argv = [python(), *argv[1:]]
    if read_only:
        view = View(view.packages, tuple(dict.fromkeys([*view.paths, *map(str, read_only)])), view.extra_etc)
    root = os.geteuid() == 0
    # A fresh uid per run (bwrap as root): it owns the working directory and nothing else.
    uid = _claim_uid() if root and kind == "bwrap" else None
    if uid is not None:
        _chown_tree(work, uid)
    read_end = write_end = None
    full = argv
    if kind == "bwrap":
        wrapper = []
        if shutil.which("bash"):
            read_end, write_end = os.pipe()
            wrapper = measuring_shell(write_end)
        full = bwrap_argv(argv, work, limits, view, uid, wrapper)
    env = dict(env or {})
    passed = tuple(fd for fd in (write_end, channel_fd) if fd is not None)
    with _handing_over(read_end, write_end):
        proc = subprocess.Popen(
            full,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=work,
            env=clean_env(env, home=work),
            start_new_session=True,
            close_fds=True,
            pass_fds=passed,
            preexec_fn=lambda: set_limits(limits, root, new_netns=(kind == "process" and root)),
        )
    return Sandbox(proc, work, uid, kind, owns, cpu_pipe=read_end)


@contextmanager
def _handing_over(read_end: int | None, write_end: int | None):
    """Around starting a child that inherits `write_end`: close our copy of it afterwards (the child holds
    the only one, so the reader sees EOF when the child's tree is gone), and `read_end` too if it failed."""
    try:
        yield
    except BaseException:
        if read_end is not None:
            os.close(read_end)
        raise
    finally:
        if write_end is not None:
            os.close(write_end)


def run(
    argv: list[str],
    *,
    stdin: bytes | Callable[[int | None], bytes] = b"",
    workdir: str | os.PathLike | None = None,
    limits: Limits = Limits(),
    env: dict[str, str] | None = None,
    read_only: list[str] | tuple = (),
    files: dict[str, str] | None = None,
    view: View = CODE,
    channel: bool = False,
    channel_bytes: int | None = None,
) -> Completed:
    """Run `argv` to completion in the sandbox; never raises on what the program does.

    channel=True: the program inherits the write end of a pipe that only this process reads; what arrives
    is `Completed.channel` (its first `channel_bytes`, default limits.output_bytes). `stdin` may be a
    function of the channel's descriptor number in the program (None without a channel) that returns
    the input: how a program learns the number without it being in its environment.
    """
    ch_read = ch_write = None
    if channel:
        ch_read, ch_write = os.pipe()
    with _handing_over(ch_read, ch_write):
        box = start(
            argv,
            workdir=workdir,
            limits=limits,
            env=env,
            read_only=read_only,
            files=files,
            view=view,
            channel_fd=ch_write,
        )
    out, err = Drain(box.proc.stdout, limits.output_bytes), Drain(box.proc.stderr, limits.output_bytes)
    chan = Drain(os.fdopen(ch_read, "rb"), channel_bytes or limits.output_bytes) if ch_read is not None else None
    over, cpu_s = "", None
    try:
        try:
            box.proc.stdin.write(stdin(ch_write) if callable(stdin) else stdin)
            box.proc.stdin.close()
        except (BrokenPipeError, OSError):
            pass  # the program exited without reading its input
        over, cpu_s = _wait(box, limits)
    finally:
        box.close()
    out.join(5)
    err.join(5)
    done = _completed(box, over, out, err, cpu_s)
    if chan is not None:
        chan.join(5)
        done.channel = chan.text()
        done.channel_truncated = chan.total > chan.cap
        done.truncated = done.truncated or done.channel_truncated
        chan.stream.close()
    return done


def _completed(box: Sandbox, over: str, out: Drain, err: Drain, cpu_s: float | None = None) -> Completed:
    rc = box.proc.returncode
    stderr = err.text()
    if over:
        status = over  # the host stopped it: "timeout" or "memory"
    elif "MemoryError" in stderr[-4000:] or "Cannot allocate memory" in stderr[-4000:]:
        status = "memory"
    elif rc == 0:
        status = "ok"
    elif rc is not None and rc < 0:
        status = "timeout" if rc == -signal.SIGXCPU else "killed"
    elif rc == 128 + signal.SIGXCPU and box.backend == "bwrap":
        status = "timeout"  # bwrap exits 128 + the signal that ended its program: the CPU limit
    else:
        status = "error"
    return Completed(
        status,
        None if over else rc,
        out.text(),
        stderr,
        out.total > out.cap or err.total > err.cap,
        time.monotonic() - box.started,
        box.backend,
        cpu_s,
    )
