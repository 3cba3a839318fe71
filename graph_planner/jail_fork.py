"""The call jail's template: every jailed child is forked from a process that never held any call's data.

The zygote reads each call's request and relays its callbacks and answers, and freed buffers are not
cleared, so a child forked from the zygote inherited what earlier calls sent (a later call could scan its own
memory and find an earlier test's arguments, or a value it planted there itself: review 13, A01 and A03).
So right after the target module is imported and the filter's preflight passed, the zygote forks this
template, which keeps only a control socket and reads nothing but commands on it. For each call the zygote
asks it for a child; the template forks one and hands the zygote the other end of the child's socket
(SCM_RIGHTS) with the child's pid; the child reads its request from that socket itself, before its filter.
Killing and reaping go through the template too (the child is its child, not the zygote's).

Standard library only: the boot script copies it per run beside jail.py.
"""

from __future__ import annotations

import os
import signal
import socket
import struct
from collections.abc import Callable

_PID = struct.Struct("<i")
_STATUS = struct.Struct("<ii")  # pid, wait status (-1: not a child of the template's)


def _recv_exact(sock: socket.socket, n: int) -> bytes:
    out = b""
    while len(out) < n:
        chunk = sock.recv(n - len(out))
        if not chunk:
            raise OSError("the jail's template is gone")
        out += chunk
    return out


def _serve(ctl: socket.socket, run_child: Callable[[int], None]) -> None:
    """The template's loop: S forks a child, W reaps one, K kills then reaps one; the zygote's end closing
    ends it (its children are killed)."""
    children: set[int] = set()
    try:
        while True:
            cmd = ctl.recv(1)
            if not cmd:
                return
            if cmd == b"S":
                ours, theirs = socket.socketpair()
                pid = os.fork()
                if pid == 0:
                    try:
                        ctl.close()
                        ours.close()
                        run_child(theirs.detach())
                    finally:
                        os._exit(1)
                theirs.close()
                socket.send_fds(ctl, [_PID.pack(pid)], [ours.fileno()])
                ours.close()
                children.add(pid)
                continue
            pid = _PID.unpack(_recv_exact(ctl, _PID.size))[0]
            status = -1
            if pid in children:
                if cmd == b"K":
                    os.kill(pid, signal.SIGKILL)
                status = os.waitpid(pid, 0)[1]
                children.discard(pid)
            ctl.sendall(_STATUS.pack(pid, status))
    finally:
        for pid in children:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)


class Template:
    """The zygote's handle on its template process."""

    def __init__(self, run_child: Callable[[int], None], close_all_but: Callable[[int], None]):
        """Fork the template now; a child it forks runs `run_child(its socket's descriptor)`, never returning;
        `close_all_but(fd)` closes every other descriptor (jail_wire.closerange_except)."""
        ours, theirs = socket.socketpair()
        pid = os.fork()
        if pid == 0:
            try:
                # none of the zygote's descriptors (its pipes to the test process above all), only the control
                close_all_but(theirs.fileno())
                # 0-2 on /dev/null, so a child's socket is never "stdout": writing there stays refused
                while (fd := os.open(os.devnull, os.O_RDWR)) < 2:
                    pass
                if fd > 2:
                    os.close(fd)
                _serve(theirs, run_child)
            finally:
                os._exit(0)
        theirs.close()
        self.pid, self.ctl = pid, ours

    def spawn(self) -> tuple[int, int]:
        """(pid, descriptor) of a new child, waiting for its request on the other end of that descriptor."""
        self.ctl.sendall(b"S")
        msg, fds, _, _ = socket.recv_fds(self.ctl, _PID.size, 1)
        if len(msg) != _PID.size or len(fds) != 1:
            raise OSError("the jail's template is gone")
        return _PID.unpack(msg)[0], fds[0]

    def reap(self, pid: int, kill: bool = False) -> int:
        """The child's wait status once it has ended (killed first, with `kill`)."""
        self.ctl.sendall((b"K" if kill else b"W") + _PID.pack(pid))
        got, status = _STATUS.unpack(_recv_exact(self.ctl, _STATUS.size))
        if got != pid or status == -1:
            raise OSError(f"the jail's template has no child {pid}")
        return status

    def close(self) -> None:
        """End the template (its children are killed) and reap it, so that its CPU time and its children's fold
        into the caller's, which the sandbox counts."""
        self.ctl.close()
        os.waitpid(self.pid, 0)
