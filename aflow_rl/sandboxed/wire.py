"""Plain-data codec between sandboxed processes: only literal types cross, so no object can lie.

Copied into each sandbox's working directory next to subject.py / harness.py (stdlib only). A value
that is not plain data (a custom object with an always-true __eq__, a generator) does not encode.
"""

import json

_SEQ = {"l": list, "t": tuple, "s": set, "fs": frozenset}
_TAG = {list: "l", tuple: "t", set: "s", frozenset: "fs"}


def encode(value, depth=0):
    """A JSON-able tree for a literal value; TypeError for anything else."""
    if depth > 60:
        raise TypeError("value nested too deeply")
    kind = type(value)
    if value is None or kind in (bool, int, str):
        return value if kind is not int else {"i": str(value)}
    if kind is float:
        return {"f": repr(value)}
    if kind is complex:
        return {"c": [repr(value.real), repr(value.imag)]}
    if kind is bytes:
        return {"b": value.hex()}
    if kind in _TAG:
        return {_TAG[kind]: [encode(v, depth + 1) for v in value]}
    if kind is dict:
        return {"d": [[encode(k, depth + 1), encode(v, depth + 1)] for k, v in value.items()]}
    raise TypeError(f"a {kind.__name__} is not plain data")


def decode(tree):
    """The value `encode` described; only builtin literal types are ever built."""
    if tree is None or type(tree) in (bool, str):
        return tree
    if type(tree) is not dict or len(tree) != 1:
        raise ValueError("malformed value")
    ((tag, body),) = tree.items()
    if tag == "i":
        return int(body)
    if tag == "f":
        return float(body)
    if tag == "c":
        return complex(float(body[0]), float(body[1]))
    if tag == "b":
        return bytes.fromhex(body)
    if tag in _SEQ:
        return _SEQ[tag](decode(v) for v in body)
    if tag == "d":
        return {decode(k): decode(v) for k, v in body}
    raise ValueError(f"unknown tag {tag!r}")


def dumps(message) -> bytes:
    """One protocol line."""
    return (json.dumps(message) + "\n").encode()
