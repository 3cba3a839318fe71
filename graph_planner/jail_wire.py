"""The call jail's plain-data codec, and the descriptor sweep a child makes before its filter.

Standard library only: a per-run copy of this file is loaded inside the sandbox (graph_planner/jail.py).

* `encode` / `decode`: a tagged binary format of None, bool, int, float, str, bytes, list, tuple, dict,
  set and frozenset, and the standard library's immutable values Decimal, Fraction, date, time, datetime
  and timedelta (a time zone only as a fixed `datetime.timezone`) (exact types, no subclasses), with caps
  on size, nodes and depth. `decode` is what the trusted side runs on bytes the jailed code wrote: it builds
  nothing else, whatever the bytes are (a value type only through its constructor, from ints and strs).

The seccomp filter is graph_planner/jail_filter.py; the clocks a child loses, graph_planner/jail_clock.py.
"""

from __future__ import annotations

import datetime
import decimal
import fractions
import os
import re
import struct

# --- the plain-data codec ----------------------------------------------------------------------------

MAX_BYTES = 16 << 20
MAX_NODES = 1 << 20
MAX_DEPTH = 64
MAX_INT_DIGITS = 4300  # the interpreter's own default int/str conversion limit
MAX_PATTERN = 100_000  # a regular expression's text, compiled by the trusted side
# Keys of one set or dict that may share a hash. Full-hash collisions are free to make (ints k * (2**61 - 1) all
# hash to 0, and tuples of them), and each one costs an equality test against every earlier one: a set of 450,000
# such ints took the test process the run's whole limit to build, outside the child's CPU limit (review 20, A23).
MAX_SAME_HASH = 16
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


def _spread_hashes(keys: list) -> None:
    """CodecError unless every key hashes and no hash is shared by more than MAX_SAME_HASH keys (counted in
    linear time, before a set or dict is built from them)."""
    seen: dict[int, int] = {}
    for k in keys:
        try:
            h = hash(k)
        except TypeError as e:  # an unhashable member (a list in a set, a signaling NaN)
            raise CodecError(str(e)) from None
        seen[h] = seen.get(h, 0) + 1
        if seen[h] > MAX_SAME_HASH:
            raise CodecError(f"more than {MAX_SAME_HASH} keys share one hash")


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
            if tag in (b"E", b"Z"):
                _spread_hashes(items)
            return {b"L": list, b"T": tuple, b"E": set, b"Z": frozenset}[tag](items)
        if tag == b"M":
            n = length()
            if n > len(data) - pos:
                raise CodecError("truncated")
            pairs = [(read(depth + 1), read(depth + 1)) for _ in range(n)]
            _spread_hashes([k for k, _ in pairs])
            return dict(pairs)
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
