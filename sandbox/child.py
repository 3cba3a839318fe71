"""What a sandboxed program is started in: the backend, its environment, its argv and its limits.

`backend()` picks bubblewrap (or the weaker process backend when asked for), `clean_env` rebuilds the
environment from an allow-list, `bwrap_argv` wraps the program in bwrap's namespaces and the drop to the
run's own uid, `measuring_shell` counts the CPU of everything the program reaped, and `set_limits` runs in
the child between fork and exec (rlimits; a private network namespace for the process backend as root).
sandbox.process starts, waits for and ends the program.
"""

from __future__ import annotations

import ctypes
import math
import os
import resource
import shutil
from dataclasses import dataclass

from sandbox.uids import _count_user_processes
from sandbox.view import View, bwrap_mounts

# Variables a sandboxed program may inherit; everything else (keys, tokens, cloud settings) is dropped.
_ENV_ALLOW = ("PATH", "LANG", "LC_ALL", "TZ")
_SECRETISH = ("KEY", "TOKEN", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL", "AUTH")


class SandboxUnavailable(RuntimeError):
    """No sandbox backend that holds is available on this machine."""


@dataclass(frozen=True)
class Limits:
    """Resource limits of one sandboxed run."""

    timeout_s: float = 15.0
    """Wall-clock limit; the whole process tree is killed when it passes."""
    cpu_s: float | None = None
    """CPU-seconds limit (reported as "timeout"): RLIMIT_CPU per process, and with a uid of its own (bwrap
    as root) also the whole run's CPU, checked every 0.2 s; None = timeout_s + 2 per process. A verdict
    that must not depend on how loaded the machine is sets this to the real budget and timeout_s to a
    wider backstop for programs that hang without computing."""
    memory_mb: int = 512
    """Address-space limit per process (RLIMIT_AS): a larger allocation raises MemoryError."""
    run_memory_mb: int | None = None
    """Resident memory of the whole run, summed over its processes every 0.2 s (with a uid of its own, bwrap
    as root); past it the run is killed with status "memory". None = memory_mb: children that each stay
    under RLIMIT_AS must not add up to more than one process may hold."""
    file_mb: int = 16
    """Largest file a process may write (RLIMIT_FSIZE)."""
    open_files: int = 64
    """Open file descriptors per process (RLIMIT_NOFILE)."""
    processes: int = 32
    """Processes the run may have at once (RLIMIT_NPROC, counted for the run's own uid)."""
    output_bytes: int = 64 * 1024
    """Bytes of stdout and of stderr kept; the rest is read and dropped."""
    tmp_mb: int = 32
    """Size of the private /tmp (bwrap backend)."""


def backend() -> str:
    """The backend in use: bwrap, or process when PLANACT_SANDBOX=process; raises when neither holds."""
    wanted = os.environ.get("PLANACT_SANDBOX", "bwrap")
    if wanted == "process":
        return "process"
    if wanted != "bwrap":
        raise SandboxUnavailable(f"PLANACT_SANDBOX={wanted!r}: expected 'bwrap' or 'process'")
    if shutil.which("bwrap") is None:
        raise SandboxUnavailable(
            "bubblewrap (`bwrap`) is not installed: `apt-get install bubblewrap` "
            "(or set PLANACT_SANDBOX=process to accept the weaker process-only sandbox)"
        )
    return "bwrap"


def clean_env(extra: dict[str, str] | None = None, home: str = "/tmp") -> dict[str, str]:
    """The child's environment: an allow-list of the parent's plus `extra`, minus anything secret-looking."""
    env = {k: os.environ[k] for k in _ENV_ALLOW if k in os.environ}
    env.setdefault("PATH", "/usr/local/bin:/usr/bin:/bin")
    env.update(
        {
            "HOME": home,
            "TMPDIR": "/tmp",
            "PYTHONHASHSEED": "0",
            "PYTHONDONTWRITEBYTECODE": "1",
            "OMP_NUM_THREADS": "1",
            "LANG": env.get("LANG", "C.UTF-8"),
        }
    )
    for k, v in (extra or {}).items():
        if any(s in k.upper() for s in _SECRETISH):
            continue  # a caller passing a key by mistake must not hand it to model code
        env[k] = v
    return env


def measuring_shell(fd: int) -> list[str]:
    """argv prefix of a bash that runs the program and writes `times` (CPU of everything it reaped) to
    `fd`. It runs before the drop to the run's uid (as root when bwrap runs as root), so the program can
    neither signal it nor write to its pipe; its own job-status messages ("Killed") go to /dev/null."""
    err = 3 if fd != 3 else 4
    script = f'exec {err}>&2 2>/dev/null; "$@" 2>&{err} {err}>&- {fd}>&-; rc=$?; times >&{fd}; exit $rc'
    return [shutil.which("bash") or "bash", "-c", script, "planact-measure"]


def bwrap_argv(
    argv: list[str], workdir: str, limits: Limits, view: View, uid: int | None, wrapper: list[str] = ()
) -> list[str]:
    """bwrap's argv around `wrapper` + `argv`: the view's mounts, namespaces, and as root the drop to `uid`."""
    cmd = [
        "bwrap",
        *bwrap_mounts(view, workdir, limits.tmp_mb),
        "--chdir",
        workdir,
        "--die-with-parent",
        "--new-session",
    ]
    if uid is None:  # an ordinary user: an unprivileged user namespace carries the others
        return cmd + ["--unshare-all", "--", *wrapper] + argv
    # Root: bwrap mounts as root, then the program drops to the run's own uid with no capabilities, so
    # file permissions protect the host too and RLIMIT_NPROC counts this run's processes only.
    cmd += ["--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try", "--", *wrapper]
    return (
        cmd
        + [
            "setpriv",
            f"--reuid={uid}",
            f"--regid={uid}",
            "--clear-groups",
            "--no-new-privs",
            "--inh-caps=-all",
            "--bounding-set=-all",
            "--",
        ]
        + argv
    )


def set_limits(limits: Limits, root: bool, new_netns: bool) -> None:
    """In the child between fork and exec: network namespace (process backend as root), then rlimits."""
    if new_netns:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.unshare(0x40000000)  # CLONE_NEWNET: only a down loopback device remains
    mem = limits.memory_mb << 20
    cpu = int(limits.timeout_s) + 2 if limits.cpu_s is None else max(1, math.ceil(limits.cpu_s))
    resource.setrlimit(resource.RLIMIT_AS, (mem, mem))
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
    resource.setrlimit(resource.RLIMIT_FSIZE, (limits.file_mb << 20, limits.file_mb << 20))
    resource.setrlimit(resource.RLIMIT_NOFILE, (limits.open_files, limits.open_files))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    # Root is exempt from RLIMIT_NPROC; once the program runs as its own uid the limit counts that uid.
    # An ordinary user's count includes every process it already runs, so those are allowed on top.
    n = limits.processes if root else _count_user_processes(os.getuid()) + limits.processes
    resource.setrlimit(resource.RLIMIT_NPROC, (n, n))
