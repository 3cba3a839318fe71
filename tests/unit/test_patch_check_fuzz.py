"""Property-based test of the patch check: every body it accepts, run, obtains no capability.

Bodies for `target(x)` in FIXTURE are generated from a grammar of gadget chains (attribute chains through
every module the file imports and through builtins, comprehension / lambda rebinding of builtin names,
keyword and dict-key dunders, strings computed at run time, the file's own dangerous helpers, `type(...)`
chains). Whatever `screen` accepts is compiled into a fresh module namespace here, in-process, and the
patched `target` is called: what it returns must be none of exec / eval / compile / open / __import__ /
getattr, sys.modules, a capability module, a frame, traceback or code object, `type` itself, or a
module's globals dict. An exception is fine. First, every known sandbox escape in
tests/unit/data/sandbox_escapes.txt is run the same way (each is refused, or accepted and harmless).

Examples are derandomized and few by default (the file runs in seconds); a long run:
    PLANACT_FUZZ_EXAMPLES=5000 pytest tests/unit/test_patch_check_fuzz.py
"""

from __future__ import annotations

import builtins
import os
import sys
import textwrap
import types
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from graph_planner.patch_check import CAPABILITY_MODULES, screen

FIXTURE = textwrap.dedent("""
    import collections
    import enum
    import functools
    import itertools
    import json
    import math
    import operator
    import os
    import re
    import string
    import sys
    import typing
    import warnings

    SEP = "/"
    FIELD = "real"


    def _globals_of(fn):
        return fn.__globals__


    def _attr(obj, name):
        return getattr(obj, name)


    def _run(code):
        exec(code)
        return code


    if sys.version_info[0] == 2:
        def exec_(code, globs=None):
            exec("exec code in globs")


    def double(x):
        return x * 2


    def label(x):
        return os.path.join(SEP, str(x)) + re.escape(str(math.floor(x)))


    class Box:
        def open(self):
            return self

        def size(self):
            return operator.attrgetter(FIELD)(self)


    def target(x):
        return x
    """).lstrip()
ANCHOR = "def target(x):\n    return x\n"
EXAMPLES = int(os.environ.get("PLANACT_FUZZ_EXAMPLES", "60"))
ESCAPES = Path(__file__).parent / "data" / "sandbox_escapes.txt"
FORBIDDEN_BUILTINS = [
    builtins.exec,
    builtins.eval,
    builtins.compile,
    builtins.open,
    builtins.__import__,
    builtins.getattr,
]


def patched(body: str) -> str:
    return FIXTURE.replace(ANCHOR, "def target(x):\n" + textwrap.indent(body.strip("\n"), "    ") + "\n")


def danger(value, namespace: dict, depth: int = 2) -> str | None:
    """What capability `value` is, or None."""
    if any(value is b for b in FORBIDDEN_BUILTINS):
        return f"the builtin {value.__name__}"
    if value is type:
        return "type itself"
    if value is sys.modules:
        return "sys.modules"
    if isinstance(value, types.ModuleType) and value.__name__.split(".")[0] in CAPABILITY_MODULES:
        return f"the module {value.__name__}"
    if isinstance(value, (types.FrameType, types.TracebackType, types.CodeType)):
        return type(value).__name__
    if isinstance(value, dict) and (
        value is namespace or value is vars(builtins) or any(value is vars(m) for m in list(sys.modules.values()) if m)
    ):
        return "a module's globals"
    if depth and isinstance(value, (list, tuple, set, frozenset)):
        return next((d for v in list(value)[:50] if (d := danger(v, namespace, depth - 1))), None)
    if depth and isinstance(value, dict):
        return next((d for v in list(value.values())[:50] if (d := danger(v, namespace, depth - 1))), None)
    return None


def run(text: str):
    """Compile the patched file into a fresh module namespace, call target(7): (its result or the
    exception it raised, the namespace)."""
    namespace = {"__name__": "planact_fuzz_target"}
    exec(compile(text, "planact_fuzz_target.py", "exec"), namespace)
    try:
        return namespace["target"](7), namespace
    except Exception as e:  # noqa: BLE001 - a body that fails is harmless; what it returns is the question
        return e, namespace


def judge(body: str) -> tuple[bool, str | None]:
    """(accepted, the capability an accepted body obtained)."""
    text = patched(body)
    try:
        compile(text, "x", "exec")
    except SyntaxError:
        return False, None
    if screen(FIXTURE, text):
        return False, None
    result, namespace = run(text)
    return True, danger(result, namespace)


def escapes() -> list[str]:
    blocks = "\n".join(line for line in ESCAPES.read_text().splitlines() if not line.startswith("#"))
    return [b.strip("\n") for b in blocks.split("\n\n") if b.strip()]


def test_every_known_sandbox_escape_is_refused_or_harmless():
    found = escapes()
    assert len(found) >= 60
    verdicts = {body: judge(body) for body in found}
    assert not {b: d for b, (_, d) in verdicts.items() if d}, "an accepted escape obtained a capability"
    # the seed corpus exercises the check: nearly all of it is refused outright
    assert sum(ok for ok, _ in verdicts.values()) <= len(found) // 10, [b for b, (ok, _) in verdicts.items() if ok]


def test_honest_bodies_in_the_fixture_are_accepted_and_run():
    for body in [
        "return x + 1",
        "return double(x)",
        "return label(x)",
        "return math.sqrt(x)",
        "return [v for v in range(x)]",
    ]:
        assert judge(body) == (True, None), body


# --- the grammar ---------------------------------------------------------------------------------------

MODULES = [
    "warnings",
    "collections",
    "enum",
    "functools",
    "itertools",
    "json",
    "math",
    "operator",
    "os",
    "re",
    "string",
    "sys",
    "typing",
]
BUILTIN_NAMES = [
    "getattr",
    "type",
    "vars",
    "object",
    "str",
    "int",
    "print",
    "len",
    "exec",
    "eval",
    "open",
    "__import__",
    "globals",
    "dir",
    "super",
    "dict",
    "__builtins__",
    "compile",
    "breakpoint",
]
HELPERS = ["_globals_of", "_attr", "_run", "exec_", "double", "label", "Box", "target", "SEP", "FIELD"]
ATTRS = [
    "sys",
    "_sys",
    "os",
    "path",
    "join",
    "modules",
    "builtins",
    "__builtins__",
    "__globals__",
    "__class__",
    "__bases__",
    "__base__",
    "__subclasses__",
    "mro",
    "__mro__",
    "__self__",
    "__func__",
    "__code__",
    "__closure__",
    "cell_contents",
    "__dict__",
    "__getattribute__",
    "_getframe",
    "f_back",
    "f_globals",
    "gi_frame",
    "tb_frame",
    "exec",
    "eval",
    "open",
    "compile",
    "real",
    "floor",
    "escape",
    "compile",
    "attrgetter",
    "methodcaller",
    "format",
    "Formatter",
    "get_field",
    "reduce",
    "catch_warnings",
    "_module",
    "wraps",
    "Enum",
    "codecs",
    "__loader__",
    "__spec__",
    "loader",
    "__init__",
    "__name__",
    "__wrapped__",
    "__reduce_ex__",
    "get_type_hints",
    "size",
    "open",
    "__func__",
]
DUNDERS = [
    "__class__",
    "__globals__",
    "__builtins__",
    "__subclasses__",
    "__self__",
    "__dict__",
    "__code__",
    "__eq__",
    "f_back",
    "gi_frame",
    "mro",
    "__import__",
    "exec",
]


def computed(name: str) -> st.SearchStrategy[str]:
    """Expressions that build `name` at run time without any constant that contains it."""
    half = len(name) // 2
    a, b = name[:half], name[half:]
    return st.sampled_from(
        [
            f"{a!r} + {b!r}",
            f"'%s%s' % ({a!r}, {b!r})",
            f"''.join([{a!r}, {b!r}])",
            f"f'{{{a!r}}}{b}'" if "'" not in b and "{" not in b else f"{a!r} + {b!r}",
            " + ".join(f"chr({ord(c)})" for c in name),
            f"{name[::-1]!r}[::-1]",
            f"{'x'.join(name)!r}.replace('x', '')",
        ]
    )


# Real public attributes of the pure standard modules the fixture imports: chains the check may accept
# without the file having used them (they resolve to plain functions, classes and values), so what their
# objects carry is tried too. Modules whose calls change process-wide state (warnings, random) are left out.
STDLIB = sorted(
    f"{m}.{a}"
    for m in ["collections", "enum", "functools", "itertools", "json", "math", "operator", "re", "string", "typing"]
    for a in dir(__import__(m))
    if not a.startswith("_") and a not in {"purge"}
)
heads = st.one_of(
    st.sampled_from(MODULES + BUILTIN_NAMES + HELPERS + ["x", "()", "''", "0", "[]", "(g for g in ())"]),
    st.sampled_from(STDLIB),
)
args = st.sampled_from(["()", "('',)", "(x,)", "('A', (), {})", "(double,)", "(0,)", "(Box(),)", "('x', 'y')"])
suffix = st.one_of(
    st.sampled_from(ATTRS).map(lambda a: "." + a),
    args,
    st.sampled_from(["[0]", "[-1]", "['exec']", "['__builtins__']", "['sys']"]),
)


@st.composite
def chains(draw) -> str:
    expr = draw(heads)
    for part in draw(st.lists(suffix, max_size=4)):
        expr += part
    return expr


@st.composite
def computed_access(draw) -> str:
    name = draw(st.sampled_from(DUNDERS))
    text = draw(computed(name))
    obj = draw(chains())
    return draw(
        st.sampled_from(
            [
                f"getattr({obj}, {text})",
                f"operator.attrgetter({text})({obj})",
                f"operator.methodcaller({text})({obj})",
                f"('{{0.' + {text} + '}}').format({obj})",
                f"string.Formatter().get_field('0.' + {text}, [{obj}], {{}})[0]",
                f"_attr({obj}, {text})",
                "Box().size.__self__",
                f"dict(**{{{text}: {obj}}})",
                f"type('A', (), {{{text}: {obj}}})",
            ]
        )
    )


@st.composite
def bodies(draw) -> str:
    prefix = draw(
        st.lists(
            st.one_of(
                st.sampled_from(BUILTIN_NAMES + ["sys", "os", "re"]).map(lambda n: f"[{n} for {n} in ()]"),
                st.sampled_from(BUILTIN_NAMES).map(lambda n: f"(lambda {n}: {n})(0)"),
                st.sampled_from(BUILTIN_NAMES).map(lambda n: f"{{{n}: 0 for {n} in ()}}"),
                st.sampled_from(DUNDERS).map(lambda d: f"d = dict({d}=x)"),
                st.sampled_from(DUNDERS).flatmap(computed).map(lambda t: f"name = {t}"),
            ),
            max_size=2,
        )
    )
    value = draw(
        st.one_of(
            chains(),
            computed_access(),
            chains().map(lambda c: f"type({c})"),
            chains().map(lambda c: f"type(type({c}))('A', (), {{}})"),
            st.just("getattr(x, name)") if any(p.startswith("name =") for p in prefix) else chains(),
        )
    )
    return "\n".join([*prefix, f"return {value}"])


@settings(max_examples=EXAMPLES, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(bodies())
def test_no_accepted_body_obtains_a_capability(body):
    accepted, obtained = judge(body)
    assert obtained is None, f"accepted and obtained {obtained}:\n{body}"


@pytest.mark.parametrize("body", ["return sys.modules", "return type(int)", "[exec for exec in ()]\nreturn exec"])
def test_the_harness_sees_a_capability_when_the_check_is_off(body, monkeypatch):
    """The property is only as good as `danger`: with the check out of the way, these bodies' results are
    caught as capabilities."""
    result, namespace = run(patched(body))
    assert danger(result, namespace)
