"""The call jail's two walls: a seccomp-BPF filter for the jailed child and a strict plain-data codec.

Standard library only: a per-run copy of this file is loaded inside the sandbox (graph_planner/jail.py).

* `install_filter(fd)`: after it, the calling process can only compute: manage its memory, read its own
  CPU time (no shared clock) and randomness, block signals, exit, and `write` and `read` on `fd` (its one
  channel to the zygote: the
  answer, and the callbacks of graph_planner/jail_callback.py); every other system call fails with EPERM (a
  call from a foreign ABI kills the process). Installed with no_new_privs, it is inherited and cannot be
  removed, and nothing the process does after it can open a file, a socket or a process.
* `encode` / `decode`: a tagged binary format of None, bool, int, float, str, bytes, list, tuple, dict,
  set and frozenset, and the standard library's immutable values Decimal, Fraction, date, time, datetime
  and timedelta (a time zone only as a fixed `datetime.timezone`) (exact types, no subclasses), with caps
  on size, nodes and depth. `decode` is what the trusted side runs on bytes the jailed code wrote: it builds
  nothing else, whatever the bytes are (a value type only through its constructor, from ints and strs).
"""

from __future__ import annotations

import ctypes
import datetime
import decimal
import fractions
import os
import platform
import re
import struct

# --- seccomp -----------------------------------------------------------------------------------------

AUDIT_ARCH_X86_64 = 0xC000003E
X32_SYSCALL_BIT = 0x40000000
RET_ALLOW = 0x7FFF0000
RET_ERRNO_EPERM = 0x00050000 | 1
RET_KILL_PROCESS = 0x80000000
PR_SET_NO_NEW_PRIVS, PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 38, 22, 2
# x86_64 numbers. Only what CPython needs to run pure code once it is loaded: memory (malloc, the
# obmalloc arenas, mprotect for nothing writable from outside), futex (the GIL), getrandom (hash seeds of a
# new dict type), signal masks and returns, and the two exits. No clock but the process's own CPU time: a
# clock shared with other processes carries data from one call to a later one (a call waits until the time
# encodes a value, the next call reads it: review 14's A09), so `clock_gettime` is allowed for ids 2 and 3
# only (a negative id would even name another process's CPU clock, which one call can move and a later one
# read: review 14's A12), and jail_clock.blind() routes the reads that need no system call to this filter.
SYS_READ, SYS_WRITE, SYS_MMAP, SYS_CLOCK_GETTIME = 0, 1, 9, 228
OWN_CPU_CLOCKS = (2, 3)  # CLOCK_PROCESS_CPUTIME_ID, CLOCK_THREAD_CPUTIME_ID
ALLOWED = {
    "brk": 12,
    "munmap": 11,
    "mremap": 25,
    "madvise": 28,
    "mprotect": 10,
    "futex": 202,
    "getrandom": 318,
    "rt_sigreturn": 15,
    "rt_sigprocmask": 14,
    "sigaltstack": 131,
    "exit": 60,
    "exit_group": 231,
}
_LD_W_ABS, _JEQ_K, _JGE_K, _JSET_K, _RET_K = 0x20, 0x15, 0x35, 0x45, 0x06
MAP_ANONYMOUS = 0x20
_NR, _ARCH = 0, 4
_ARG = [16 + 8 * i for i in range(6)]  # seccomp_data.args[i]: low 32 bits first (little endian)


def available() -> str:
    """Why seccomp filters cannot jail this process ("" when they can): x86_64 Linux with filter support."""
    if platform.system() != "Linux" or platform.machine() != "x86_64":
        return f"the jail's filter is written for x86_64 Linux, not {platform.system()} {platform.machine()}"
    try:
        with open("/proc/sys/kernel/seccomp/actions_avail") as fh:
            actions = fh.read().split()
    except OSError:
        return ""  # /proc/sys hidden (a sandbox view): install_filter's own result decides
    return "" if {"errno", "allow"} <= set(actions) else f"this kernel's seccomp lacks errno/allow: {actions}"


def _program(fd: int) -> bytes:
    """The BPF program: allow ALLOWED, `read(fd, ...)`, `write(fd, ...)`, anonymous `mmap`; EPERM for the rest."""
    ins: list[tuple[int, int, int, int]] = []

    def op(code, k, jt=0, jf=0):
        ins.append((code, jt, jf, k))

    deny, allow = "deny", "allow"
    jumps: list[tuple[int, str, str]] = []  # (index, true target, false target) resolved below

    def branch(k, if_true, if_false=None):
        jumps.append((len(ins), if_true, if_false))
        op(_JEQ_K, k)

    op(_LD_W_ABS, _ARCH)
    op(_JEQ_K, AUDIT_ARCH_X86_64, 1, 0)  # another ABI (i386 numbers differ): kill, never guess
    op(_RET_K, RET_KILL_PROCESS)
    op(_LD_W_ABS, _NR)
    op(_JGE_K, X32_SYSCALL_BIT, 0, 1)
    op(_RET_K, RET_KILL_PROCESS)
    for nr in sorted(ALLOWED.values()):
        branch(nr, allow)
    branch(SYS_READ, "channel")
    branch(SYS_WRITE, "channel")
    branch(SYS_MMAP, "mmap")
    branch(SYS_CLOCK_GETTIME, "clock")
    op(_RET_K, RET_ERRNO_EPERM)
    labels = {"channel": len(ins)}
    # read and write: only on the channel descriptor (both halves of the 64-bit argument); a read can only
    # fill the process's own memory with what the zygote relays, a write only reach the zygote
    op(_LD_W_ABS, _ARG[0])
    branch(fd, "channel_hi", deny)
    labels["channel_hi"] = len(ins)
    op(_LD_W_ABS, _ARG[0] + 4)
    branch(0, allow, deny)
    # mmap: anonymous only (MAP_ANONYMOUS in flags, the kernel then ignores fd; glibc passes fd -1 as a
    # 32-bit int, so the argument's upper half is not reliable): a shared writable file mapping would be a
    # write to that file
    # clock_gettime: the process's own CPU clocks only (a clockid_t is 32 bits)
    labels["clock"] = len(ins)
    op(_LD_W_ABS, _ARG[0])
    branch(OWN_CPU_CLOCKS[0], allow)
    branch(OWN_CPU_CLOCKS[1], allow, deny)
    labels["mmap"] = len(ins)
    op(_LD_W_ABS, _ARG[3])
    jumps.append((len(ins), allow, deny))
    op(_JSET_K, MAP_ANONYMOUS)
    labels[deny] = len(ins)
    op(_RET_K, RET_ERRNO_EPERM)
    labels[allow] = len(ins)
    op(_RET_K, RET_ALLOW)
    for at, if_true, if_false in jumps:
        code, _, _, k = ins[at]
        jt = labels[if_true] - at - 1
        jf = 0 if if_false is None else labels[if_false] - at - 1
        assert 0 <= jt < 256 and 0 <= jf < 256
        ins[at] = (code, jt, jf, k)
    return b"".join(struct.pack("<HBBI", *i) for i in ins)


class _Fprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


_libc = None


def prepare() -> None:
    """Load libc's prctl now (dlopen opens files: after the filter it could not)."""
    global _libc
    if _libc is None:
        _libc = ctypes.CDLL(None, use_errno=True)
        _libc.prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_void_p, ctypes.c_ulong, ctypes.c_ulong]


def install_filter(fd: int) -> None:
    """Jail the calling (single-threaded) process: see the module docstring. Raises OSError when it cannot."""
    prepare()
    code = _program(fd)
    buf = ctypes.create_string_buffer(code, len(code))
    prog = _Fprog(len(code) // 8, ctypes.cast(buf, ctypes.c_void_p))
    if _libc.prctl(PR_SET_NO_NEW_PRIVS, 1, None, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS) failed")
    if _libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.addressof(prog), 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_SECCOMP) failed")


# --- the plain-data codec ----------------------------------------------------------------------------

MAX_BYTES = 16 << 20
MAX_NODES = 1 << 20
MAX_DEPTH = 64
MAX_INT_DIGITS = 4300  # the interpreter's own default int/str conversion limit
MAX_PATTERN = 100_000  # a regular expression's text, compiled by the trusted side
PATTERN_FLAGS = int(re.IGNORECASE | re.LOCALE | re.MULTILINE | re.DOTALL | re.UNICODE | re.VERBOSE | re.ASCII)


class CodecError(ValueError):
    """A value that is not plain data, or bytes that are no encoding of one."""


_SEQ = {list: b"L", tuple: b"T", set: b"E", frozenset: b"Z"}
# value types as the fields their constructor takes (a time zone: a fixed timezone's offset and name, or None)
_TIMES = {datetime.date: b"a", datetime.time: b"h", datetime.datetime: b"w", datetime.timedelta: b"g"}
_TIME_OF = {tag: t for t, tag in _TIMES.items()}


def _tz(tz):
    if tz is None:
        return None
    if type(tz) is not datetime.timezone:
        raise CodecError(f"not plain data: a time zone of {type(tz).__qualname__}")
    offset, *name = tz.__getinitargs__()
    return (_fields(offset), *name)


def _fields(v) -> tuple:
    """The constructor's arguments of a value of _TIMES."""
    t = type(v)
    if t is datetime.timedelta:
        return (v.days, v.seconds, v.microseconds)
    if t is datetime.date:
        return (v.year, v.month, v.day)
    clock = (v.hour, v.minute, v.second, v.microsecond, _tz(v.tzinfo), v.fold)
    return clock if t is datetime.time else (v.year, v.month, v.day, *clock)


def _build(t, fields):
    """A value of _TIMES from what decode read (CodecError for anything its constructor would not take)."""
    if type(fields) is not tuple or not all(type(f) is int for f in fields if f is not None and type(f) is not tuple):
        raise CodecError("bad value fields")
    try:
        if t is datetime.timedelta:
            return datetime.timedelta(*fields)
        if t is datetime.date:
            return datetime.date(*fields)
        *head, tz, fold = fields
        if tz is not None:
            if type(tz) is not tuple or not 1 <= len(tz) <= 2 or (len(tz) == 2 and type(tz[1]) is not str):
                raise CodecError("bad time zone")
            tz = datetime.timezone(_build(datetime.timedelta, tz[0]), *tz[1:])
        return t(*head, tzinfo=tz, fold=fold)
    except (TypeError, ValueError, OverflowError) as e:
        raise CodecError(f"bad {t.__name__}: {e}") from None


def encode(value, handle=None) -> bytes:
    """`value` as tagged bytes; CodecError when it holds anything but exact plain types or passes a cap.
    `handle(v)`: the number of a handle `v` stands in for (jail_callback's proxies), or None."""
    out: list[bytes] = []
    size = [0, 0]  # bytes, nodes

    def put(b: bytes) -> None:
        size[0] += len(b)
        if size[0] > MAX_BYTES:
            raise CodecError("result too large")
        out.append(b)

    def walk(v, depth: int) -> None:
        size[1] += 1
        if size[1] > MAX_NODES or depth > MAX_DEPTH:
            raise CodecError("result too large or too deep")
        t = type(v)  # exact types: a subclass could carry an __eq__, a __hash__ or a __reduce__
        if v is None:
            put(b"N")
        elif t is bool:
            put(b"1" if v else b"0")
        elif t is int:
            digits = int.__repr__(v).encode()
            if len(digits) > MAX_INT_DIGITS:
                raise CodecError("integer too large")
            put(b"I" + struct.pack("<I", len(digits)) + digits)
        elif t is float:
            put(b"D" + struct.pack("<d", v))
        elif t is str:
            data = str.encode(v, "utf-8", "surrogatepass")
            put(b"S" + struct.pack("<I", len(data)) + data)
        elif t is bytes:
            put(b"B" + struct.pack("<I", len(v)) + v)
        elif t in _SEQ:
            items = list(v) if t in (set, frozenset) else v
            put(_SEQ[t] + struct.pack("<I", len(items)))
            for x in items:
                walk(x, depth + 1)
        elif t is dict:
            put(b"M" + struct.pack("<I", len(v)))
            for k, x in dict.items(v):
                walk(k, depth + 1)
                walk(x, depth + 1)
        elif t is decimal.Decimal:
            text = decimal.Decimal.__str__(v).encode()  # exact: Decimal(str(d)) is d's value
            if len(text) > MAX_INT_DIGITS:
                raise CodecError("decimal too large")
            put(b"q" + struct.pack("<I", len(text)) + text)
        elif t is fractions.Fraction:
            put(b"r")
            walk(v.numerator, depth + 1)
            walk(v.denominator, depth + 1)
        elif t in _TIMES:
            put(_TIMES[t])
            walk(_fields(v), depth + 1)
        elif t is re.Pattern:
            put(b"p")
            walk((v.pattern, v.flags), depth + 1)
        elif handle is not None and (number := handle(v)) is not None:
            put(b"H")  # one of the call's handles, going back: the other side has the object
            walk(number, depth + 1)
        else:
            raise CodecError(f"not plain data: {t.__module__}.{t.__qualname__}")

    walk(value, 0)
    return b"".join(out)


def decode(data: bytes, resolve=None):
    """The value `data` encodes; CodecError for anything else (trailing bytes, unknown tags, caps passed).
    `resolve(number)`: the object of one of the call's handles (CodecError for a number that is none)."""
    if type(data) is not bytes or len(data) > MAX_BYTES:
        raise CodecError("not an encoding")
    pos, nodes = 0, 0

    def take(n: int) -> bytes:
        nonlocal pos
        if n < 0 or pos + n > len(data):
            raise CodecError("truncated")
        chunk = data[pos : pos + n]
        pos += n
        return chunk

    def length() -> int:
        return struct.unpack("<I", take(4))[0]

    def read(depth: int):
        nonlocal nodes
        nodes += 1
        if nodes > MAX_NODES or depth > MAX_DEPTH:
            raise CodecError("too large or too deep")
        tag = take(1)
        if tag == b"N":
            return None
        if tag in (b"0", b"1"):
            return tag == b"1"
        if tag == b"I":
            n = length()
            if n > MAX_INT_DIGITS:
                raise CodecError("integer too large")
            text = take(n)
            if not text or not all(c in b"-0123456789" for c in text):
                raise CodecError("bad integer")
            return int(text)
        if tag == b"D":
            return struct.unpack("<d", take(8))[0]
        if tag == b"S":
            return take(length()).decode("utf-8", "surrogatepass")
        if tag == b"B":
            return take(length())
        if tag in (b"L", b"T", b"E", b"Z"):
            n = length()
            if n > len(data) - pos:  # every item takes a byte at least
                raise CodecError("truncated")
            items = [read(depth + 1) for _ in range(n)]
            try:
                return {b"L": list, b"T": tuple, b"E": set, b"Z": frozenset}[tag](items)
            except TypeError as e:  # an unhashable member (a list in a set)
                raise CodecError(str(e)) from None
        if tag == b"M":
            n = length()
            if n > len(data) - pos:
                raise CodecError("truncated")
            out = {}
            for _ in range(n):
                k = read(depth + 1)
                try:
                    out[k] = read(depth + 1)
                except TypeError as e:
                    raise CodecError(str(e)) from None
            return out
        if tag == b"q":
            n = length()
            if n > MAX_INT_DIGITS:
                raise CodecError("decimal too large")
            try:  # (a string is read exactly, whatever the context's precision)
                return decimal.Decimal(take(n).decode("ascii"))
            except (UnicodeDecodeError, ArithmeticError, ValueError):
                raise CodecError("bad decimal") from None
        if tag == b"r":
            num, den = read(depth + 1), read(depth + 1)
            if type(num) is not int or type(den) is not int or den <= 0:
                raise CodecError("bad fraction")
            return fractions.Fraction(num, den)
        if tag in _TIME_OF:
            return _build(_TIME_OF[tag], read(depth + 1))
        if tag == b"p":  # compiled here, from its text and flags (re.error: no pattern)
            fields = read(depth + 1)
            if type(fields) is not tuple or len(fields) != 2 or type(fields[1]) is not int:
                raise CodecError("bad pattern")
            if type(fields[0]) not in (str, bytes) or len(fields[0]) > MAX_PATTERN or fields[1] & ~PATTERN_FLAGS:
                raise CodecError("bad pattern")  # (re.DEBUG would print here: not a flag a value needs)
            try:
                return re.compile(*fields)
            except (re.error, ValueError, TypeError, OverflowError, RecursionError) as e:
                raise CodecError(f"bad pattern: {e}") from None
        if tag == b"H":
            number = read(depth + 1)
            if resolve is None or type(number) is not int:
                raise CodecError("a handle where none may be")
            return resolve(number)
        raise CodecError(f"unknown tag {tag!r}")

    value = read(0)
    if pos != len(data):
        raise CodecError("trailing bytes")
    return value


def closerange_except(keep: int) -> None:
    """Close every descriptor but `keep` (before the filter: after it, close itself is refused)."""
    os.closerange(0, keep)
    os.closerange(keep + 1, 1 << 16)
