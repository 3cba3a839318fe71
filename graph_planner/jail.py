"""The call jail: the patched function runs only in a forked, seccomp-jailed child, never in the test process.

Standard library only: the boot script (corpus/plugin/planact_boot.py) loads a per-run copy of this file and
of its siblings (jail_*.py), and starts `python -s <copy> ` as the zygote, a fresh interpreter that holds none of the
test process's memory.

* The zygote imports the target module with the target function's code replaced by a trampoline (so no
  patched code runs at import), keeps the patched function's code object (compiled, never run), checks
  that a seccomp filter can be installed, forks its template (jail_fork.py) before it reads any call, then
  serves calls: one child per call, forked by the template, so no earlier call's data is in its memory.
* The child reads its request from its socket, unpickles (args, kwargs) (the test process pickled them;
  classes of test modules are refused; a callable or iterator of the tests' is a handle, jail_callback.py),
  closes every descriptor but its one
  channel (a socket to the zygote), sets rlimits (CPU seconds, address space), loses every clock
  (jail_clock.py), installs the filter of jail_filter.py (only memory, randomness, plain
  futex waits and wakes, signals' masks, exit, and `read`/`write` on the channel), swaps the
  patched code in, calls it, and writes the value or the exception (type as module + qualname, args) in
  jail_wire's plain-data codec, as a frame (tag, length, bytes). Before that it may write callback frames
  (K), which the zygote relays to the test process and whose replies (A) it relays back, checking only
  their shape and size; the test process judges what they say. The zygote kills it at a wall-clock deadline.
* In the test process an import hook compiles the target module with the same trampoline, whose body sends
  the call to the zygote and decodes the answer into plain data or an exception of an allowed class
  (builtins, the standard library, the package; never MemoryError or a BaseException outside Exception).
  Anything else (a timeout, a crash, a refused value, a call or time cap passed) is a fault: `on_fault`
  ends the run (the boot script reports it and exits), so no test can catch it and pass.
"""

from __future__ import annotations

import gc
import importlib.machinery
import importlib.util
import io
import json
import os
import pickle
import resource
import select
import signal
import struct
import sys
import time
import types


def _sibling(name: str):
    """graph_planner.<name> when this is graph_planner.jail; in a per-run copy, the copy of that file beside
    this one (never the installed project's, which may be other code)."""
    if __name__.startswith("graph_planner."):
        return importlib.import_module(f"graph_planner.{name}")
    here = os.path.join(os.path.dirname(os.path.abspath(__file__)), f"{name}.py")
    spec = importlib.util.spec_from_file_location(f"planact_{name}", here)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


wire = _sibling("jail_wire")
seccomp = _sibling("jail_filter")
clock = _sibling("jail_clock")
_rewrite = _sibling("jail_rewrite")
callbacks = _sibling("jail_callback")
fork = _sibling("jail_fork")
JAIL_NAME, JailFault, ImportHook, trampoline = (
    _rewrite.JAIL_NAME,
    _rewrite.JailFault,
    _rewrite.ImportHook,
    _rewrite.trampoline,
)

STDLIB = frozenset(sys.stdlib_module_names)
MAX_NESTING = 8  # a callback that calls the jailed function again: a call inside a call, this deep at most
# standard library modules that functions import when first used (datetime.strptime imports _strptime): the
# zygote imports them, since a jailed child cannot open a module's file
PRELOAD = ("_strptime", "unicodedata", "copy", "string", "textwrap")


def _wall_factor(cfg: dict) -> float:
    """How many times a CPU-second limit the clock may run before a call or the run's calls are stopped."""
    return float(cfg.get("wall_factor", 4.0))


# --- framing over the zygote's stdin/stdout ------------------------------------------------------------


def _send(fd: int, tag: bytes, data: bytes) -> None:
    view = memoryview(tag + struct.pack("<I", len(data)) + data)
    while view:
        view = view[os.write(fd, view) :]


def _read_exact(fd: int, n: int, deadline: float | None = None) -> bytes:
    out = bytearray()
    while len(out) < n:
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                raise JailFault("the zygote did not answer in time")
        chunk = os.read(fd, min(n - len(out), 1 << 20))
        if not chunk:
            raise JailFault("the zygote is gone")
        out += chunk
    return bytes(out)


def _recv(fd: int, deadline: float | None = None) -> tuple[bytes, bytes]:
    head = _read_exact(fd, 5, deadline)
    n = struct.unpack("<I", head[1:])[0]
    if n > wire.MAX_BYTES + 64:
        raise JailFault("oversized message")
    return head[:1], _read_exact(fd, n, deadline)


def _testish(module: str) -> bool:
    """A module name that may be test code (its expected values must never enter a jailed child)."""
    return any(p.startswith("test") or p in ("conftest", "testing") or p.endswith("_test") for p in module.split("."))


# --- the zygote and its children ---------------------------------------------------------------------


class _Unpickler(pickle.Unpickler):
    """The child's unpickler: classes of modules loaded already, of the standard library or of the package,
    never of test code (importing a test module would put its expected values in the child's reach)."""

    package = ""
    channel = None  # the child's callbacks.Channel: a handle the test process wrote becomes a proxy on it

    def find_class(self, module, name):
        top = module.split(".")[0]
        if _testish(module) or not (module in sys.modules or top in STDLIB or top == self.package):
            raise pickle.UnpicklingError(f"the jail does not load {module}.{name}")
        return super().find_class(module, name)

    def persistent_load(self, pid):
        if self.channel is None:
            raise pickle.UnpicklingError("a handle outside a jailed call")
        return callbacks.proxy(pid, self.channel)


def _loads(data: bytes, channel):
    """Unpickle what the test process sent the child (the call's arguments, a callback's reply)."""
    unpickler = _Unpickler(io.BytesIO(data))
    unpickler.channel = channel
    return unpickler.load()


class _Sink(io.TextIOBase):
    """Where the child's print and warnings go: nowhere (its descriptors are closed, writes refused)."""

    def write(self, s):
        return len(s)


def _child(chan: int, functions: list, patched, limits: dict, clock_steps: tuple) -> None:
    """A child the template forked: see the module docstring; `chan` its one descriptor. Never returns."""
    write, exit_, encode, BaseEx = callbacks.write_frame, os._exit, wire.encode, BaseException
    try:
        wire.closerange_except(chan)
        _, request = _recv(chan)  # its call's request: no other call's data was ever in this process
        channel = callbacks.Channel(chan, None, encode, _testish)
        channel.loads = lambda data: _loads(data, channel)
        args, kwargs = _loads(request, channel)
        cpu = max(1, int(limits["call_s"] + 0.999))
        resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu))
        with open("/proc/self/statm") as fh:  # the address space in use now, plus the allowance
            used = int(fh.read().split()[0]) * resource.getpagesize()
        space = used + limits["memory_mb"] * (1 << 20)
        soft, hard = resource.getrlimit(resource.RLIMIT_AS)
        space = space if hard == resource.RLIM_INFINITY else min(space, hard)
        resource.setrlimit(resource.RLIMIT_AS, (space, space))
        sys.stdout = sys.stderr = _Sink()
        clock.blind(clock_steps)  # no clock shared with another call (review 14's A09), then the filter
        seccomp.install_filter(chan)
        # from here on the patched code may do anything: all that leaves this process is what it writes
        # to `chan`, and the trusted side decodes only plain data from it
        for fn in functions:
            fn.__code__ = patched
        try:
            value, raised = functions[0](*args, **kwargs), None
        except BaseEx as e:
            value, raised = None, e
        # (a value that will not encode is a fault, never an exception the test could expect)
        if raised is None:
            tag, out = b"V", encode(value, callbacks.number_of)
        else:
            kind, index = type(raised), getattr(raised, "planact_callback", -1)  # a callback's, by index
            tag, out = b"X", encode((kind.__module__, kind.__qualname__, raised.args, index), callbacks.number_of)
    except BaseException as e:  # noqa: BLE001 - any failure is the verdict "fault"
        tag, out = b"F", f"{type(e).__name__}: {e}"[:500].encode("utf-8", "replace")
    try:
        write(chan, tag, out)
    finally:
        exit_(0)


class _Stop(Exception):
    """The call ends as a fault, for this reason (the child is killed)."""


class _Late(_Stop):
    """The call ran past its wall-clock backstop."""


def _read_upto(fd: int, n: int, deadline: float) -> bytes:
    """Up to `n` bytes of the child's (fewer at its end); _Late past the deadline."""
    out = bytearray()
    while len(out) < n:
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([fd], [], [], left)[0]:
            raise _Late()
        try:
            chunk = os.read(fd, min(n - len(out), 1 << 20))
        except BlockingIOError:
            continue
        if not chunk:
            break
        out += chunk
    return bytes(out)


def _frame(fd: int, deadline: float) -> tuple[bytes, bytes] | None:
    """One frame of the child's; None at its end. Whatever it wrote is checked for shape and size only."""
    head = _read_upto(fd, callbacks.FRAME.size, deadline)
    if not head:
        return None
    if len(head) < callbacks.FRAME.size:
        raise _Stop("the jailed child wrote a truncated message")
    tag, n = callbacks.FRAME.unpack(head)
    if n > wire.MAX_BYTES + 64:
        raise _Stop("the call's message passed the size cap")
    data = _read_upto(fd, n, deadline)
    if len(data) < n:
        raise _Stop("the jailed child wrote a truncated message")
    return tag, data


def _write_all(fd: int, data: bytes, deadline: float) -> None:
    """Relay a reply to the child; _Late past the deadline (a child that never reads cannot stall us)."""
    view = memoryview(data)
    while view:
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([], [fd], [], left)[1]:
            raise _Late()
        try:
            view = view[os.write(fd, view) :]
        except BlockingIOError:
            continue
        except OSError as e:
            raise _Stop(f"the jailed child is gone: {e}") from None


def _answer(fd: int, deadline: float, nested) -> tuple[bytes, bytes] | None:
    """The child's answer, relaying its callbacks (K) to the test process and the replies (A) back, and
    serving a call (Q) a callback makes meanwhile; None when the child ended without one."""
    while True:
        frame = _frame(fd, deadline)
        if frame is None:
            return None
        tag, data = frame
        if tag in (b"V", b"X", b"F"):
            if _read_upto(fd, 1, deadline):
                raise _Stop("the jailed child wrote past its answer")
            return tag, data
        if tag != b"K":
            raise _Stop(f"the jailed child sent an unknown message {tag!r}")
        _send(1, b"K", data)
        while True:
            try:
                reply_tag, reply = _recv(0, deadline)
            except JailFault:
                raise _Late() from None
            if reply_tag == b"Q":
                _send(1, *nested(reply))
                continue
            if reply_tag != b"A":  # Z: the test process ended the call (a fault, or pytest's outcome)
                raise _Stop("the test process ended the call")
            _write_all(fd, callbacks.FRAME.pack(b"A", len(reply)) + reply, deadline)
            break


def _serve_call(request: bytes, template, limits: dict, depth: int = 0) -> tuple[bytes, bytes]:
    """A child of the template's for one call; (tag, payload) of its answer or of the fault."""
    pid, fd = template.spawn()
    os.set_blocking(fd, False)

    def nested(request: bytes) -> tuple[bytes, bytes]:
        if depth >= MAX_NESTING:
            return b"F", b"jailed calls nested too deep"
        return _serve_call(request, template, limits, depth + 1)

    # The child's CPU is limited by RLIMIT_CPU; the clock is only a backstop (wall_factor x), for a child that
    # blocks without computing: a verdict must not depend on how loaded the machine is.
    wall = limits["call_s"] * limits["wall_factor"]
    answer, why = None, ""
    deadline = time.monotonic() + wall
    try:
        _write_all(fd, callbacks.FRAME.pack(b"Q", len(request)) + request, deadline)
        answer = _answer(fd, deadline, nested)
    except _Late:
        why = f"the call ran past {wall:g} s"
    except _Stop as e:
        why = str(e)
    finally:
        os.close(fd)
        status = template.reap(pid, kill=bool(why))
    if why:
        return b"F", why.encode()
    if os.WIFSIGNALED(status) and os.WTERMSIG(status) in (signal.SIGXCPU, signal.SIGKILL):
        # RLIMIT_CPU: SIGXCPU at the soft limit, SIGKILL at the hard one (set equal, so the kernel kills it)
        return b"F", f"the call ran past its {limits['call_s']:g} CPU-s (or was killed)".encode()
    if not os.WIFEXITED(status) or os.WEXITSTATUS(status) != 0:
        return b"F", f"the jailed child died ({status})".encode()
    if answer is None:
        return b"F", b"the jailed child wrote no answer"
    return answer


def _preflight(clock_steps: tuple) -> str:
    """Why the filter does not hold in a child of this process ("" when opening a file is refused there)."""
    why = seccomp.available() or clock.tsc_wait_open() or clock.counters_open(clock_steps)
    if why:
        return why
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            clock.blind(clock_steps)
            seccomp.install_filter(w)
            try:
                os.open("/", os.O_RDONLY)
                msg = b"open was allowed"
            except PermissionError:
                msg = b"ok"
            try:  # the vDSO's path, then the system call's
                msg = b"the wall clock was read: %d" % time.time()
            except PermissionError:
                msg = seccomp.what_leaks().encode() or msg
        except BaseException as e:  # noqa: BLE001
            msg = repr(e).encode()[:300]
        os.write(w, msg)
        os._exit(0)
    os.close(w)
    msg = os.read(r, 400)
    os.close(r)
    os.waitpid(pid, 0)
    return "" if msg == b"ok" else f"seccomp filter unavailable: {msg.decode(errors='replace')}"


def zygote_main() -> None:
    """The zygote's loop: configuration, import, preflight, then one answer per request on stdout."""
    tag, data = _recv(0)
    cfg = json.loads(data)
    sys.path[:] = cfg["path"]
    _Unpickler.package = cfg["package"]

    def refuse(args, kwargs):
        raise JailFault("the target function was called while its module was imported")

    try:
        hook = ImportHook(cfg["file"], cfg["qualname"], cfg["first"], cfg["last"], refuse, keep=True)
        hook.install()
        importlib.import_module(cfg["module"])
        for name in PRELOAD:
            importlib.import_module(name)
        if not hook.codes:
            raise JailFault(f"importing {cfg['module']} did not load {cfg['file']}")
        tramp, patched = hook.codes[-1]
        gc.collect()
        functions = [f for f in gc.get_referrers(tramp) if type(f) is types.FunctionType]
        if not functions:
            raise JailFault(f"{cfg['qualname']} was never made a function")
        seccomp.prepare()
        clock_steps = clock.plan()  # worked out here once: every child is a fork of this address space
        why = _preflight(clock_steps)
        limits = {"call_s": float(cfg["call_s"]), "memory_mb": int(cfg["memory_mb"]), "wall_factor": _wall_factor(cfg)}
        # forked before this process reads any call: every call's child comes from it (jail_fork.py)
        if not why:
            template = fork.Template(
                lambda chan: _child(chan, functions, patched, limits, clock_steps), wire.closerange_except
            )
    except BaseException as e:  # noqa: BLE001
        why = f"{type(e).__name__}: {e}"
    _send(1, b"R", why.encode())
    if why:
        return
    while True:
        try:
            tag, request = _recv(0)
        except JailFault:
            template.close()  # the test process ended (reaped: every call's CPU counted; review 14)
            return
        if tag == b"Q":  # (an A or Z here is left from a call that ended already)
            _send(1, *_serve_call(request, template, limits))


if __name__ == "__main__":
    zygote_main()
