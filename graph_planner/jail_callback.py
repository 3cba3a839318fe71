"""The call jail's callbacks: a callable (or iterator) the tests pass to the jailed function stays in the test
process, and the jailed child calls it back through the zygote.

Standard library only: graph_planner/jail.py loads a per-run copy of this file beside it.

* Test process (`Handles`, one per call): the call's arguments are pickled with every callable the child
  could not run as the tests' own (a lambda, a function of a test module, a bound method, a partial, a
  callable object) and every iterator replaced by a number of this call's table; `serve` answers one
  request of the child: it decodes (number, args, kwargs) with the strict plain-data codec only, calls the
  real callable, and pickles the result for the child as the arguments were (callables in it become new
  handles of the call), or the exception it raised (class as module + qualname, args, its index).
* Child (`Channel`, `Callback`, `Iterator`): a proxy stands in for each handle; calling it writes a `K` frame
  on the child's one descriptor and reads the `A` frame the zygote relays back. A request it cannot encode,
  or a reply it cannot read, ends the child with a fault (`F`): nothing the patched code can catch.

A proxy the child hands back (in its value, an exception or a callback's arguments) is its number again, and
the test process puts its own object there. A `re.Match` goes as a read-only copy (`MatchView`), no handle.
The child never gets anything but what the tests gave the function: results of their own callables.
"""

from __future__ import annotations

import io
import os
import pickle
import re
import secrets
import struct
import sys
import types

FRAME = struct.Struct("<cI")  # tag, length: every message between child and zygote
PLAIN = frozenset({type(None), bool, int, float, str, bytes, tuple, list, dict, set, frozenset})


class CallbackError(Exception):
    """In the child: an exception a callback raised whose class the child cannot rebuild."""


# --- frames on the child's descriptor ----------------------------------------------------------------------


def write_frame(fd: int, tag: bytes, data: bytes) -> None:
    """Write one frame (blocking: the child's end)."""
    view = memoryview(FRAME.pack(tag, len(data)) + data)
    while view:
        view = view[os.write(fd, view) :]


def read_exact(fd: int, n: int) -> bytes:
    """`n` bytes from `fd` (blocking: the child's end); EOFError when the zygote closed it."""
    out = bytearray()
    while len(out) < n:
        chunk = os.read(fd, n - len(out))
        if not chunk:
            raise EOFError("the channel closed")
        out += chunk
    return bytes(out)


# --- the test process's end ---------------------------------------------------------------------------------


def by_reference(obj, package: str, testish) -> bool:
    """A plain function the child can import by name (stdlib, builtins or the package, no test module)."""
    owner = getattr(obj, "__self__", None)
    if owner is not None and type(owner) is not types.ModuleType:
        return False  # a bound method: its object is the tests', and so are the calls' effects on it
    module, qualname = getattr(obj, "__module__", None), getattr(obj, "__qualname__", None)
    if type(module) is not str or type(qualname) is not str or testish(module):
        return False
    top = module.split(".")[0]
    if not (top in sys.stdlib_module_names or top == package):
        return False
    found = sys.modules.get(module)
    for part in qualname.split("."):
        found = getattr(found, part, None)
    return found is obj


def kind(obj, package: str, testish) -> str:
    """The handle kind `obj` goes to the child as ("call" or "iter"), or "" when it is pickled as it is."""
    t = type(obj)
    if t in PLAIN or isinstance(obj, type):
        return ""
    if t is re.Match:
        return "match"  # goes as a read-only copy (MatchView)
    iterator = hasattr(t, "__next__") and hasattr(t, "__iter__")
    if not (iterator or callable(obj)):
        return ""
    if t in (types.FunctionType, types.BuiltinFunctionType):
        return "" if by_reference(obj, package, testish) else "call"
    if t is not types.MethodType and not testish(t.__module__):
        # an object of the standard library's or the package's that pickles as it is goes as it does without
        # callbacks (an itemgetter, a list's iterator); one that cannot (a generator, a map over a lambda, a
        # Mock) is called back
        top = t.__module__.split(".")[0]
        if top in sys.stdlib_module_names or top == package:
            try:
                pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
                return ""
            except Exception:  # noqa: BLE001 - not picklable: a handle
                pass
    return "iter" if iterator else "call"


class _Pickler(pickle.Pickler):
    """Pickles a call's arguments (or a callback's result) with its callables and iterators as handles."""

    handles: Handles

    def persistent_id(self, obj):
        handles = self.handles
        what = kind(obj, handles.package, handles.testish)
        if not what:
            # an object of a test module's class would reach the child whole (its expected values with it),
            # before any unpickler there could refuse it: refused here, in the test process (review 13, A05)
            if not isinstance(obj, type) and handles.testish(getattr(type(obj), "__module__", "") or ""):
                raise pickle.PicklingError(f"an object of the tests' class {type(obj).__qualname__} stays here")
            return None
        if what == "match":  # plain data, no handle: the pattern, the string, the spans
            groups = dict(obj.re.groupindex)
            last = (obj.lastindex, obj.lastgroup)
            return (what, 0, (obj.re.pattern, obj.re.flags, groups, obj.string, obj.pos, obj.endpos, obj.regs, last))
        number = Handles.fresh()
        handles.table[number] = obj.__next__ if what == "iter" else obj
        handles.objects[number] = obj
        name = getattr(obj, "__name__", None)
        return (what, number, name if type(name) is str else what)


class Handles:
    """One jailed call's table of handles (numbers unique in the run: a stale one is in no later table)."""

    # Random, not counted: a count would tell a later call how many handles earlier calls made, a value one
    # call could set (a test's factory called N times) for another to read (review 14).
    used: set[int] = set()

    @staticmethod
    def fresh() -> int:
        """A handle number no earlier handle of this process had."""
        while (number := secrets.randbits(62) + 1) in Handles.used:
            pass
        Handles.used.add(number)
        return number

    def __init__(self, package: str, testish, fatal: type | tuple = ()):
        # fatal: the jail's own faults, which pass through a callable that made a jailed call, never to the child
        self.package, self.testish, self.fatal = package, testish, fatal
        self.table: dict[int, object] = {}  # what a callback of each number calls
        self.objects: dict[int, object] = {}  # what each number stands for, when the child hands it back
        self.raised: list[BaseException] = []  # what the callbacks raised: the child refers to one by index
        self.count = self.bytes = 0  # the child's requests: how many, how many bytes

    def dumps(self, value) -> bytes:
        """`value` pickled for the child, with callables and iterators as this call's handles."""
        out = io.BytesIO()
        pickler = _Pickler(out, protocol=pickle.HIGHEST_PROTOCOL)
        pickler.handles = self
        pickler.dump(value)
        return out.getvalue()

    def resolve(self, number: int):
        """The object a handle of this call stands for (the child returned or passed it back)."""
        if number not in self.objects:
            raise ValueError(f"handle {number} is none of this call's")
        return self.objects[number]

    def request(self, value) -> tuple:
        """The callable and arguments of a decoded request; ValueError for anything else."""
        ok = type(value) is tuple and len(value) == 3 and type(value[0]) is int
        if not ok or type(value[1]) is not tuple or type(value[2]) is not dict:
            raise ValueError("a malformed callback request")
        if any(type(k) is not str for k in value[2]):
            raise ValueError("a callback's keyword is not a string")
        if value[0] not in self.table:
            raise ValueError(f"handle {value[0]} is none of this call's")
        return self.table[value[0]], value[1], value[2]

    def serve(self, fn, args: tuple, kwargs: dict) -> bytes:
        """Call the real callable; the reply pickled for the child (an Exception's class, args and index).
        A BaseException that is no Exception (pytest's outcomes, KeyboardInterrupt) is not caught: it ends
        the call here, as it would have ended it without the jail; so does an AssertionError (a test's own
        check failed: its message may hold the expected values, which must never reach the child)."""
        try:
            value = fn(*args, **kwargs)
        except self.fatal:
            raise
        except AssertionError:
            raise
        except Exception as e:  # noqa: BLE001 - the callable's own exception, for the child to raise
            self.raised.append(e)
            kind_ = type(e)
            head = (kind_.__module__, kind_.__qualname__)
            try:
                return self.dumps(("X", (*head, e.args, len(self.raised) - 1)))
            except Exception:  # noqa: BLE001 - args that cannot be sent: the message alone
                return self.dumps(("X", (*head, (str(e)[:2000],), len(self.raised) - 1)))
        return self.dumps(("V", value))  # (a value that cannot be sent: the caller's fault, never the child's)


# --- the child's end ----------------------------------------------------------------------------------------


class Channel:
    """The child's end of the callbacks: `loads` unpickles a reply (its handles bound to this channel)."""

    def __init__(self, fd: int, loads, encode, testish):
        self.fd, self.loads, self.encode, self.testish = fd, loads, encode, testish

    def fault(self, why: str):
        """End the child with a fault: no patched code may catch it."""
        try:
            write_frame(self.fd, b"F", why.encode("utf-8", "replace")[:500])
        finally:
            os._exit(0)

    def call(self, number: int, args: tuple, kwargs: dict):
        """Call handle `number` in the test process: its value, or its exception raised here."""
        try:
            request = self.encode((number, args, kwargs), handle=number_of)
        except Exception as e:  # noqa: BLE001 - only plain data leaves the jail
            self.fault(f"a callback's arguments are not plain data: {e}")
        try:
            write_frame(self.fd, b"K", request)
            tag, n = FRAME.unpack(read_exact(self.fd, FRAME.size))
            what, value = self.loads(read_exact(self.fd, n))
        except Exception as e:  # noqa: BLE001
            self.fault(f"the callback's reply cannot be read: {type(e).__name__}: {e}")
        if tag != b"A" or what not in ("V", "X"):
            self.fault("the callback's reply is malformed")
        if what == "V":
            return value
        raise self.rebuild(*value)

    def rebuild(self, module: str, qualname: str, args, index: int) -> BaseException:
        """The callback's exception as its class where this process has it loaded, else CallbackError; tagged
        with its index, so that if it leaves the function the test process raises the very object."""
        cls = sys.modules.get(module) if not self.testish(module) else None
        for part in qualname.split(".") if cls is not None else ():
            cls = getattr(cls, "__dict__", {}).get(part)
        if not (isinstance(cls, type) and issubclass(cls, Exception)):
            cls, args = CallbackError, (f"{module}.{qualname}", *args)
        try:
            error = cls(*args)
        except Exception:  # noqa: BLE001 - a constructor that takes other arguments than its args
            error = cls.__new__(cls)
            error.args = args
        try:
            error.planact_callback = index
        except Exception:  # noqa: BLE001 - a class with slots: it leaves as its class, not as the object
            pass
        return error


class Callback:
    """In the child: stands in for a callable of the tests."""

    def __init__(self, channel: Channel, number: int, name: str):
        self._channel, self._number, self.__name__, self.__qualname__ = channel, number, name, name

    def __call__(self, *args, **kwargs):
        """Call the tests' callable in the test process."""
        return self._channel.call(self._number, args, kwargs)

    def __repr__(self) -> str:
        return f"<callback {self.__name__}>"


class Iterator:
    """In the child: stands in for an iterator of the tests (each item is asked for when it is needed)."""

    def __init__(self, channel: Channel, number: int, name: str):
        self._channel, self._number = channel, number

    def __iter__(self) -> Iterator:
        """Itself, as an iterator is."""
        return self

    def __next__(self):
        """The tests' iterator's next item (its StopIteration raised here)."""
        return self._channel.call(self._number, (), {})


class MatchView:
    """In the child: a read-only copy of a re.Match of the test process (groups, spans, string, pattern)."""

    def __init__(self, pattern, flags: int, groupindex: dict, string, pos: int, endpos: int, regs: tuple, last):
        self.re = re.compile(pattern, flags)
        self.string, self.pos, self.endpos, self.regs, self._names = string, pos, endpos, regs, groupindex
        self.lastindex, self.lastgroup = last

    def _span(self, group) -> tuple:
        index = self._names.get(group, -1) if type(group) is str else group
        if type(index) is not int or not 0 <= index < len(self.regs):
            raise IndexError("no such group")
        return self.regs[index]

    def __getitem__(self, group):
        """As re.Match: one group."""
        return self.group(group)

    def group(self, *groups):
        """As re.Match.group."""
        found = [self._get(g, None) for g in groups or (0,)]
        return found[0] if len(found) == 1 else tuple(found)

    def _get(self, group, default):
        a, b = self._span(group)
        return default if a == -1 else self.string[a:b]

    def groups(self, default=None) -> tuple:
        """As re.Match.groups."""
        return tuple(self._get(i, default) for i in range(1, len(self.regs)))

    def groupdict(self, default=None) -> dict:
        """As re.Match.groupdict."""
        return {name: self._get(i, default) for name, i in self._names.items()}

    def span(self, group=0) -> tuple:
        """As re.Match.span."""
        return self._span(group)

    def start(self, group=0) -> int:
        """As re.Match.start."""
        return self._span(group)[0]

    def end(self, group=0) -> int:
        """As re.Match.end."""
        return self._span(group)[1]

    def expand(self, template):
        """As re.Match.expand."""
        return re._expand(self.re, self, template)


def number_of(value) -> int | None:
    """The handle a proxy stands for, so that handing it back gives the test process its own object."""
    return value._number if type(value) in (Callback, Iterator) else None


def proxy(pid, channel: Channel):
    """The child's stand-in for a persistent id the test process wrote."""
    if not (type(pid) is tuple and len(pid) == 3 and pid[0] in ("call", "iter", "match") and type(pid[1]) is int):
        raise ValueError("a malformed handle")
    if pid[0] == "match":
        return MatchView(*pid[2])
    return (Callback if pid[0] == "call" else Iterator)(channel, pid[1], str(pid[2]))
