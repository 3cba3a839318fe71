"""The run's own uid (bwrap as root): claimed per run, counted, summed for CPU, and killed as a whole.

Every sandboxed run as root drops to a fresh unprivileged uid, so everything the run started is
"the processes of that uid": its process count, its CPU seconds and the kill on timeout all use that.
"""

from __future__ import annotations

import os
import random
import signal
import tempfile
from pathlib import Path

_UID_RANGE = (200_000, 260_000)


def _user_pids(uid: int) -> list[str]:
    """/proc entries of the processes `uid` runs now."""
    pids = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                if os.stat(f"/proc/{d}").st_uid == uid:
                    pids.append(d)
            except OSError:
                pass  # exited while we looked
    return pids


def _count_user_processes(uid: int) -> int:
    return len(_user_pids(uid))


def _tree_usage(uid: int) -> tuple[float, float]:
    """(CPU seconds, resident MB) of every live process of `uid`, CPU with what each has reaped."""
    ticks = pages = 0
    for d in _user_pids(uid):
        try:
            with open(f"/proc/{d}/stat") as fh:
                fields = fh.read().rsplit(")", 1)[1].split()
            ticks += sum(int(x) for x in fields[11:15])  # utime, stime, cutime, cstime
            pages += int(fields[21])  # rss, in pages
        except (OSError, ValueError, IndexError):
            pass  # exited while we looked
    return ticks / os.sysconf("SC_CLK_TCK"), pages * os.sysconf("SC_PAGE_SIZE") / (1 << 20)


def _kill_uid(uid: int) -> None:
    """SIGKILL every process running as `uid` (a helper drops to the uid and signals -1)."""
    pid = os.fork()
    if pid == 0:  # pragma: no cover - runs in the forked helper
        try:
            os.setgroups([])
            os.setgid(uid)
            os.setuid(uid)
            for _ in range(3):
                os.kill(-1, signal.SIGKILL)  # every process this uid may signal: all of the run's
        except OSError:
            pass
        os._exit(0)
    os.waitpid(pid, 0)


def _uid_claim(uid: int) -> Path:
    return Path(tempfile.gettempdir()) / "planact-sandbox-uids" / str(uid)


def _claim_uid() -> int:
    """A uid no other live sandbox on this machine holds (claimed with an exclusive file create): the
    timeout kill signals every process of the uid, so two runs must never share one."""
    rng = random.SystemRandom()
    _uid_claim(0).parent.mkdir(mode=0o700, exist_ok=True)
    while True:
        uid = rng.randrange(*_UID_RANGE)
        try:
            os.close(os.open(_uid_claim(uid), os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
            return uid
        except FileExistsError:
            continue


def _chown_tree(path: str, uid: int) -> None:
    os.chown(path, uid, uid)
    for root, dirs, files in os.walk(path):
        for name in dirs + files:
            os.lchown(os.path.join(root, name), uid, uid)
