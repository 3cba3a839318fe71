"""The call jail, the test process's end: it starts the zygote (graph_planner/jail.py), hooks the target
module's import so that its function is a trampoline, sends each call to the zygote and decodes the answer.

Standard library only: the boot script (corpus/plugin/planact_boot.py) loads a per-run copy of this file
beside per-run copies of jail.py and its other siblings (jail_*.py).
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import time
import types


def _jail():
    """graph_planner.jail when this is graph_planner.jail_client; in a per-run copy, the jail.py beside it."""
    if __name__.startswith("graph_planner."):
        return importlib.import_module("graph_planner.jail")
    here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "jail.py")
    spec = importlib.util.spec_from_file_location("planact_jail", here)
    jail = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(jail)
    return jail


_z = _jail()
wire, JailFault, ImportHook, STDLIB = _z.wire, _z.JailFault, _z.ImportHook, _z.STDLIB
_send, _recv, _testish, _wall_factor, _rewrite = _z._send, _z._recv, _z._testish, _z._wall_factor, _z._rewrite
callbacks = _z.callbacks
ZYGOTE = _z.__file__  # the zygote's script: jail.py, run as `python -s jail.py`


class _Reported(JailFault):
    """A fault already reported to the run's handler."""


class Client:
    """The test process's end of the jail: starts the zygote, sends calls, decodes answers."""

    def __init__(self, lib: str, cfg: dict, on_fault):
        cfg = {**cfg, "path": list(sys.path)}  # the zygote imports as this process would
        self.wall = _wall_factor(cfg)  # the clock's backstop, a multiple of the CPU-second limits
        self.cfg, self.on_fault = cfg, on_fault
        self.calls, self.spent, self.error, self.depth = 0, 0.0, "", 0
        self.hook = None  # the import hook (start): its trampolines tell our target from another loader's
        self.package = cfg["package"]
        self.proc = subprocess.Popen(
            [sys.executable, "-s", lib],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            close_fds=True,
            cwd=os.getcwd(),
        )
        self.wfd, self.rfd = self.proc.stdin.fileno(), self.proc.stdout.fileno()
        _send(self.wfd, b"C", json.dumps(cfg).encode())

    def ready(self) -> str:
        """Wait for the zygote; why it cannot serve calls ("" when it can)."""
        if not hasattr(self, "_ready"):
            try:
                _, why = _recv(self.rfd, time.monotonic() + float(self.cfg.get("start_s", 60)))
                self._ready = why.decode(errors="replace")
            except JailFault as e:
                self._ready = str(e)
        return self._ready

    def fault(self, why: str, abort: float = 0.0):
        """Report a fault (the boot script's handler ends the run); raise for a handler that returns, after
        ending the call in progress (`abort`: its deadline) so that the zygote serves the next one."""
        self.error = self.error or why
        self.on_fault(why)
        if abort:
            self._abort(abort)
        raise _Reported(why)

    def _abort(self, deadline: float) -> None:
        """End the call in progress: the zygote kills its child and answers; skip what comes before that."""
        try:
            _send(self.wfd, b"Z", b"")
            while _recv(self.rfd, deadline)[0] == b"K":
                pass
        except (JailFault, OSError):
            pass

    def __call__(self, args: tuple, kwargs: dict):
        """The trampoline's target: run the patched function in a jailed child."""
        why = self.ready()
        if why:
            self.fault(f"the jail cannot run: {why}")
        self.calls += 1
        if self.calls > int(self.cfg["max_calls"]) or self.spent > float(self.cfg["total_s"]) * self.wall:
            self.fault("the jailed calls passed their cap of calls or seconds for this run")
        handles = callbacks.Handles(self.package, _testish, _Reported)
        try:
            request = handles.dumps((args, kwargs))
        except Exception as e:  # noqa: BLE001 - an argument the child cannot receive
            self.fault(f"the call's arguments cannot be sent to the jail: {type(e).__name__}: {e}")
        start = time.monotonic()
        deadline = start + float(self.cfg["call_s"]) * self.wall + 10
        self.depth += 1  # a callback may call the jailed function again: its time is counted once
        try:
            _send(self.wfd, b"Q", request)
            while True:
                tag, data = _recv(self.rfd, deadline)
                if tag != b"K":
                    break
                _send(self.wfd, b"A", self._callback(handles, data, deadline))
        except _Reported:
            raise
        except (JailFault, OSError) as e:
            self.fault(str(e))
        finally:
            self.depth -= 1
        if not self.depth:
            self.spent += time.monotonic() - start
        if tag == b"F":
            self.fault(data.decode(errors="replace"))
        try:
            value = wire.decode(data, handles.resolve)  # (a handle: an object this call gave the child)
        except Exception as e:  # noqa: BLE001 - bytes that encode no plain data
            self.fault(f"the jailed call answered no plain data: {e}")
        if tag == b"V":
            return value
        raise self._exception(value, handles)

    def _callback(self, handles, data: bytes, deadline: float) -> bytes:
        """Serve a child's callback request: its reply, pickled. Everything in `data` is the child's: decoded
        only as plain data, a handle of this call only, counted against the call's caps (its time is the
        call's: the child's deadline runs on while the callable does)."""
        handles.count += 1
        handles.bytes += len(data)
        if handles.count > int(self.cfg.get("max_callbacks", 100_000)):
            self.fault("the jailed call passed its cap of callbacks", deadline)
        if handles.bytes > int(self.cfg.get("callback_mb", 256)) << 20:
            self.fault("the jailed call's callbacks passed their cap of bytes", deadline)
        try:
            fn, args, kwargs = handles.request(wire.decode(data, handles.resolve))
        except Exception as e:  # noqa: BLE001 - a malformed request: the child is hostile
            self.fault(f"a jailed callback request is refused: {e}", deadline)
        try:
            return handles.serve(fn, args, kwargs)
        except _Reported:  # a call the callable made in turn faulted: this one ends too
            self._abort(deadline)
            raise
        except AssertionError:
            # A test's own assertion failed inside its callable: it ends the call and fails the test here, as it
            # would unjailed. Sent to the child, pytest's message would hand it the expected values (review 13, A03)
            self._abort(deadline)
            raise
        except Exception as e:  # noqa: BLE001 - a result that cannot be sent to the child
            self.fault(f"a callback's result cannot be sent to the jail: {type(e).__name__}: {e}", deadline)
        except BaseException:
            self._abort(deadline)  # pytest's outcome or an interrupt ends the call, as it would unjailed
            raise

    def _exception(self, value, handles) -> BaseException:
        """The exception the child raised, rebuilt from (module, qualname, args) when its class is allowed, or
        the very exception a callback of this call raised (index), which the function let out."""
        if not (type(value) is tuple and len(value) == 4 and type(value[0]) is str and type(value[1]) is str):
            self.fault("the jailed call's exception is malformed")
        module, qualname, args, index = value
        if type(index) is int and 0 <= index < len(handles.raised):
            error = handles.raised[index]
        else:
            error = self._rebuilt(module, qualname, args)
        # Out of a plain call, StopIteration ends the caller's loop silently (`all(map(f, xs))` is then True
        # whatever f computes): a forge the value cannot show, so it never leaves the jail (review 13, A06)
        if isinstance(error, (StopIteration, StopAsyncIteration)):
            self.fault(f"the jailed call let {type(error).__name__} out, which would end a caller's loop silently")
        return error

    def _rebuilt(self, module: str, qualname: str, args) -> BaseException:
        """The child's exception as its class, when the class is allowed (else a fault)."""
        top = module.split(".")[0]
        allowed = module == "builtins" or (not _testish(module) and (top in STDLIB or top == self.package))
        cls = sys.modules.get(module) if allowed else None
        # A qualname is a path of classes: each step is looked up in the module's or a class's own dictionary
        # and must be a class (never an instance, or a module the file imported: classes of other modules)
        for part in qualname.split(".") if cls is not None else ():
            cls = vars(cls).get(part)
            if not isinstance(cls, type):
                cls = None
                break
        if not (isinstance(cls, type) and issubclass(cls, Exception)) or issubclass(cls, MemoryError):
            self.fault(f"the jailed call raised {module}.{qualname}, which the jail does not pass on")
        if type(args) is not tuple:
            args = (args,)
        try:
            return cls(*args)
        except Exception:  # noqa: BLE001 - a constructor that takes other arguments than its args
            e = cls.__new__(cls)
            e.args = args
            return e

    def stray(self) -> str:
        """A module of the target file that another loader loaded (pytest's assertion rewriter claims files
        named like tests): its patched code ran outside the jail ("" when there is none). A copy of our
        module's namespace (toolz's `tlz` builds its modules so, naming the file) is none: nothing of the file
        ran there."""
        file = os.path.realpath(self.cfg["file"])
        named = [(n, m) for n, m in list(sys.modules.items()) if isinstance(getattr(m, "__file__", None), str)]
        named = [(n, m) for n, m in named if os.path.realpath(m.__file__) == file]
        ours = [m for _, m in named if type(getattr(getattr(m, "__spec__", None), "loader", None)) is _rewrite.Loader]
        for name, module in named:
            if all(module is not m for m in ours) and not self._copied(module, ours, file):
                return f"module {name} was loaded without the jail's hook"
        return ""

    def _copied(self, module, ours: list, file: str) -> bool:
        """Whether `module`'s target is our trampoline and every function or class of the file it holds is one
        of our modules' own objects (a compile of the file by another loader makes new ones)."""
        tramps = {id(tramp) for tramp, _ in self.hook.codes} if self.hook is not None else set()
        found = module
        for part in self.cfg["qualname"].split("."):  # looked up by dictionaries only
            space = getattr(found, "__dict__", None)
            found = space.get(part) if isinstance(space, dict | types.MappingProxyType) else None
        found = getattr(found, "__func__", found)  # a staticmethod's or classmethod's function
        if type(found) is not types.FunctionType or id(found.__code__) not in tramps:
            return False
        known = {id(v) for m in ours for v in vars(m).values()}

        def of_file(v) -> bool:
            members = [v] if type(v) is types.FunctionType else list(vars(v).values()) if isinstance(v, type) else []
            codes = [getattr(getattr(f, "__func__", f), "__code__", None) for f in members]
            return any(type(c) is types.CodeType and os.path.realpath(c.co_filename) == file for c in codes)

        return all(id(v) in known or not of_file(v) for v in list(vars(module).values()))

    def close(self) -> None:
        """End the zygote."""
        try:
            self.proc.stdin.close()
            self.proc.wait(timeout=5)
        except Exception:  # noqa: BLE001
            self.proc.kill()


def start(cfg: dict, on_fault, lib: str = ZYGOTE) -> Client:
    """Start the zygote (`lib`: jail.py's path) and hook the target module's import in this process.
    cfg: module, file, qualname, first, last (the target's lines), package (its top-level package), call_s,
    total_s, max_calls, memory_mb; with "base" (the unpatched file's text), once the zygote has read the
    patched file, the file on disk becomes the base text: a subprocess a test starts (a command-line test
    running `python -m package`) imports the unpatched function, never the patch outside the jail."""
    with open(cfg["file"], "rb") as fh:
        source = fh.read()
    base = cfg.pop("base", None)
    client = Client(lib, cfg, on_fault)
    target = (cfg["file"], cfg["qualname"], cfg["first"], cfg["last"])
    try:  # the trampoline carries the unpatched function's docstring (a package's own test of its docs)
        doc = _rewrite.docstring(base, *target) if base is not None else None
    except (SyntaxError, ValueError):
        doc = None
    client.hook = ImportHook(*target, client, source=source, doc=doc)
    client.hook.install()
    if base is not None and not client.ready():
        cached = importlib.util.cache_from_source(cfg["file"])
        folder, stem = os.path.dirname(cached), os.path.basename(cached).split(".")[0]
        for name in os.listdir(folder) if os.path.isdir(folder) else ():
            if name.split(".")[0] == stem:  # a bytecode cache of the patched text must not stand in for it
                os.unlink(os.path.join(folder, name))
        with open(cfg["file"], "w", encoding="utf-8") as fh:
            fh.write(base)
    return client
