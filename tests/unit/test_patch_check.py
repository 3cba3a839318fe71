"""The patch check (graph_planner/patch_check.py): what a repair may change, and every family of route
past it that an independent review found, each beside an honest repair that must still pass."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from graph_planner.patch_check import changed_functions, screen

SRC = textwrap.dedent("""
    import math


    class Box:
        def area(self, w, h):
            if w < 0 or h < 0:
                return 0
            return w * h


    def hyp(a, b):
        return math.sqrt(a * a + b * b)
    """).lstrip()


def test_screen_allows_repairs_and_refuses_what_forging_needs():
    assert screen(SRC, SRC.replace("w * h", "h * w")) == []
    assert screen(SRC, SRC.replace("return 0", "return math.sqrt(0)")) == []  # a module attribute the file uses
    assert screen(SRC, SRC.replace("return 0", "return hyp(w, h)")) == []  # a pure function the file defines
    assert screen(SRC, SRC.replace("return 0", "total = w + h\n            return total")) == []  # its own local
    assert screen(SRC, SRC.replace("return 0", "return 0  # comments change nothing")) == []
    assert screen(SRC, SRC.replace("return 0", "return type(w) in (bytes, bytearray)")) == []  # type of a value
    assert "adds Import" in screen(SRC, SRC.replace("return 0", "import os\n            return 0"))[0]
    assert "reads exec" in screen(SRC, SRC.replace("return 0", "return exec('1')"))[0]
    assert "__class__" in screen(SRC, SRC.replace("return 0", "return ().__class__"))[0]
    assert "syntax error" in screen(SRC, SRC.replace("return 0", "return ("))[0]
    # a module attribute the unpatched file never reached: only through a pure standard module, and only
    # when it resolves to a plain function, class or value (never a module such as re.sys)
    assert screen(SRC, SRC.replace("return 0", "return math.floor(0)")) == []
    with_re = "import re\n" + SRC
    assert "re.sys" in screen(with_re, with_re.replace("return 0", "return re.sys"))[0]


# One hostile body per family of routes past the first deny-list check; each must be refused.
BYPASSES = {
    # syntax the old check did not look at: structure outside bodies, new definitions, match, global
    "new module statement": ("return w * h", "return w * h\n\n\nimport os"),
    "new function": ("def hyp(a, b):", "def helper():\n    return 1\n\n\ndef hyp(a, b):"),
    "new method": (
        "    def area(self, w, h):",
        "    def __eq__(self, other):\n        return True\n\n    def area(self, w, h):",
    ),
    "new class in a body": ("return 0", "class Any:\n                pass\n            return Any()"),
    "nested def": ("return 0", "def eq(*a):\n                return True\n            return eq"),
    "lambda": ("return 0", "return (lambda: 1)()"),
    "match": ("return 0", "match w:\n                case _:\n                    return 0"),
    "global": ("return 0", "global math\n            return 0"),
    "changed default": ("def hyp(a, b):", "def hyp(a, b=print):"),
    "decorator": ("def hyp(a, b):", "@staticmethod\ndef hyp(a, b):"),
    # names the old check did not know, and names that merely appear elsewhere in the file
    "type() builds an always-equal object": ("return 0", "return type('A', (), {})()"),
    "getattr": ("return 0", "return getattr(w, 'real')"),
    "vars": ("return 0", "return vars()"),
    "__import__": ("return 0", "return __import__('sys')"),
    "builtins through a module attribute": ("return 0", "return math.__loader__"),
    "string dunder": ("return 0", "return dict.get({}, '__globals__')"),
    "frame attribute": ("return 0", "return (x for x in ()).gi_frame.f_back"),
    "code attribute": ("return 0", "return hyp.co_consts"),
    "object": ("return 0", "return object()"),
    "open": ("return 0", "return open('x').read()"),
}


@pytest.mark.parametrize("name", sorted(BYPASSES))
def test_the_patch_check_refuses_every_family_of_bypass(name):
    old, new = BYPASSES[name]
    assert SRC.count(old) == 1, name
    assert screen(SRC, SRC.replace(old, new)), f"{name} was accepted"


def test_the_patch_check_reads_the_text_python_executes():
    # A source-encoding line makes Python decode the same bytes as other text (utf-7 turns "+AAo-" into a
    # newline): the check refuses any added or changed declaration.
    hidden = "# -*- coding: utf-7 -*-\n" + SRC.replace("return 0", "return 0 #+AAo-import os")
    assert "encoding" in screen(SRC, hidden)[0]
    declared = "# coding: latin-1\n" + SRC
    assert "encoding" in screen(declared, "# coding: utf-7\n" + SRC)[0]
    assert screen(declared, declared.replace("w * h", "h * w")) == []
    # names imported from modules with process / file / import-system power stay where they were
    with_os = "import os\n" + SRC
    assert "reads os" in screen(with_os, with_os.replace("return 0", "return os.getpid()"))[0]
    with_sys = "import sys as s\n" + SRC
    assert "reads s" in screen(with_sys, with_sys.replace("return 0", "return s.modules"))[0]
    kept = SRC.replace("return 0", "return getattr(w, 'real', 0)")
    assert screen(kept, kept.replace("'real', 0", "'imag', 0")) == []  # a body may keep what it had


# The review's seven families, each with attack bodies the first check accepted (verified against
# commit 25d60dc), in a file that gives each a foothold: helpers that hand out globals, getattr or exec,
# a Python-2 branch defining exec_, a method named open, imports of modules that carry sys.
FILE = textwrap.dedent("""
    import builtins
    import collections
    import enum
    import operator
    import os
    import re
    import string
    import sys
    import warnings

    SEP = "/"


    def _globals_of(fn):
        return fn.__globals__


    def _lookup(obj, name):
        return getattr(obj, name)


    def _run(code):
        exec(code)


    def _double(x):
        return x * 2


    def attr_name(x):
        return x.lower()


    def lookup(obj, x):
        return getattr(obj, attr_name(x))


    def key_name(x):
        return x.upper()


    def sort_key(x):
        return operator.attrgetter(key_name(x))


    if sys.version_info[0] >= 3:  # six's pattern: the py3 branch binds the builtin, the py2 one a def
        exec_ = getattr(builtins, "exec")
    else:
        def exec_(code, globs=None):
            exec("exec code in globs")


    def first(items):
        return sorted(items, key=lambda item: item)[0]


    def label(x):
        return os.path.join(SEP, str(x))


    def pick(obj, name, default=None):
        return getattr(obj, name, default)


    def by(items, name):
        key = operator.attrgetter(name)
        return sorted(items, key=key)


    def describe(x):
        template = "{0} items"
        return template.format(x)


    class Store:
        def open(self):
            return {}

        def total(self, xs):
            if not xs:
                return 0
            return sum(xs)

        def fields(self):
            return string.Formatter().parse("{a}")
    """).lstrip()
BODY = "return sum(xs)"  # the statement each attack replaces, in Store.total

ATTACKS = {
    "1 comprehension rebinds exec": "[exec for exec in ()]\n        return exec('import os')",
    "1 comprehension rebinds __import__": "[__import__ for __import__ in ()]\n        return __import__('os')",
    "1 comprehension rebinds getattr": "[getattr for getattr in ()]\n        return getattr(xs, 'real')",
    "2 type of a class is type": "return type(int)('A', (), {})()",
    "2 keyword dunder": "return dict(__eq__=xs)",
    "2 dict-literal dunder key": "return dict(**{'__eq__': xs})",  # (the first check saw this string too)
    "3 a py2 branch defines exec_": "return exec_('import os')",
    "3 a method named open": "return open('/proc/self/fd/3', 'w')",
    "4 helper returns globals": "return _globals_of(label)",
    "4 helper calls getattr": "return _lookup(label, 'x')",
    "4 helper calls exec": "return _run('import os')",
    "5 re carries sys": "return re.sys.modules",
    "5 collections carries sys": "return collections._sys",
    "5 enum carries sys": "return enum.sys",
    "5 a module laundered into a local": "m = re\n        return m",
    "5 a module kept in a stdlib object's private attribute": "return warnings.catch_warnings()._module.sys",
    "6 attrgetter with a computed dunder": "return operator.attrgetter('_' + '_glob' + 'als_' + '_')(label)",
    "6 Formatter.get_field": "return string.Formatter().get_field('0._' + '_glob' + 'als_' + '_', [label], {})",
    "7 format with a computed field": "return ('{0._' + '_cla' + 'ss_' + '_}').format(xs)",
    "6 attrgetter with a chr-built dunder": "return operator.attrgetter(chr(95) * 2 + 'class' + chr(95) * 2)(xs)",
}
# Family 7 inside functions that already hold a gadget: the gadget stays, its input is computed anew; and
# family 1 where the function already has a lambda (so no lambda is added): its parameter renamed open.
KEPT_GADGET_ATTACKS = {
    "1 a kept lambda's parameter named open": (
        "return sorted(items, key=lambda item: item)[0]",
        "sorted(items, key=lambda open: open)\n    return open('/proc/self/fd/3', 'w')",
    ),
    "concatenation": (
        "return getattr(obj, name, default)",
        "return getattr(obj, '_' + '_glob' + 'als_' + '_', default)",
    ),
    "%-format": (
        "return getattr(obj, name, default)",
        "return getattr(obj, '%s%sglobals%s%s' % ('_', '_', '_', '_'), default)",
    ),
    "f-string": (
        "return getattr(obj, name, default)",
        "u = '_'\n    return getattr(obj, f'{u}{u}globals{u}{u}', default)",
    ),
    "join": (
        "return getattr(obj, name, default)",
        "name = ''.join(['_', '_', 'globals', '_', '_'])\n    return getattr(obj, name, default)",
    ),
    "chr": (
        "return getattr(obj, name, default)",
        "name = chr(95) * 2 + 'globals' + chr(95) * 2\n    return getattr(obj, name, default)",
    ),
    "attrgetter input": ("key = operator.attrgetter(name)", "key = operator.attrgetter(name + '_' + '_class_' + '_')"),
    "format receiver": ('template = "{0} items"', 'template = "{0._" + "_class_" + "_}"'),
    "a changed helper feeds an unchanged attrgetter": (
        "return x.upper()",
        "return chr(95) * 2 + 'globals' + chr(95) * 2",
    ),
}
# A changed function's return value reaching an unchanged getattr, setattr, delattr or import_module is the
# boot script's name guard's to judge, by the name's value at run time (tests/integration/
# test_verdict_names.py voids it there); refusing it too refused real fixes that return attribute names.
GUARDED_AT_RUN = {
    "a changed helper feeds an unchanged getattr": ("return x.lower()", "return chr(95) * 2 + 'globals' + chr(95) * 2"),
}
# Honest repairs in the same file that must still pass.
CONTROLS = {
    "changed comparison": ("if not xs:", "if len(xs) == 0:"),
    "restored statement with the function's own names": ("return sum(xs)", "total = sum(xs)\n        return total"),
    "restored os.path.join the file already uses": ("return sum(xs)", "return os.path.join(SEP, str(sum(xs)))"),
    "a pure helper the file defines": ("return sum(xs)", "return _double(sum(xs))"),
    "a kept getattr(obj, name), its default fixed": ("getattr(obj, name, default)", "getattr(obj, name, None)"),
    "a kept getattr with a repair next to it": (
        "return getattr(obj, name, default)",
        "if obj is None:\n        return default\n    return getattr(obj, name, default)",
    ),
    "a constant format template": ('template = "{0} items"', 'template = "{0} item(s)"'),
    "a literal attribute name for attrgetter": ("key = operator.attrgetter(name)", "key = operator.attrgetter('size')"),
}


@pytest.mark.parametrize("name", sorted(ATTACKS))
def test_each_family_of_the_review_is_refused(name):
    after = FILE.replace(BODY, ATTACKS[name])
    assert FILE.count(BODY) == 1 and after != FILE
    assert screen(FILE, after), f"{name} was accepted"


@pytest.mark.parametrize("name", sorted(KEPT_GADGET_ATTACKS))
def test_a_kept_gadget_takes_no_computed_name(name):
    old, new = KEPT_GADGET_ATTACKS[name]
    assert FILE.count(old) == 1
    assert screen(FILE, FILE.replace(old, new)), f"{name} was accepted"


@pytest.mark.parametrize("name", sorted(GUARDED_AT_RUN))
def test_a_name_for_an_unchanged_getattr_is_left_to_the_name_guard(name):
    old, new = GUARDED_AT_RUN[name]
    assert FILE.count(old) == 1
    assert screen(FILE, FILE.replace(old, new)) == []


@pytest.mark.parametrize("name", sorted(CONTROLS))
def test_honest_repairs_beside_the_attacks_still_pass(name):
    old, new = CONTROLS[name]
    assert FILE.count(old) == 1
    assert screen(FILE, FILE.replace(old, new)) == []


def test_unchanged_statements_reordered_are_a_changed_slice():
    """Each statement feeding a kept getattr is unchanged, but their order builds "__class__" from the
    old function's "_xclass__": the slice is compared in order, block by block."""
    old = textwrap.dedent("""
        def pick(obj):
            a = "xclass"
            a = "_" + a
            a = "_" + a
            a = a[1:]
            a = a + "_"
            a = a + "_"
            return getattr(obj, a, None)
        """).lstrip()
    new = old.replace(
        '    a = "_" + a\n    a = "_" + a\n    a = a[1:]\n', '    a = a[1:]\n    a = "_" + a\n    a = "_" + a\n'
    )
    assert new != old and sorted(new.splitlines()) == sorted(old.splitlines())
    assert "getattr with a computed argument" in screen(old, new)[0]
    assert screen(old, old.replace("None)", "0)")) == []  # the same slice: a fix beside it passes


def test_a_jump_in_a_loop_counts_only_when_the_loop_carries_a_value_to_the_gadget():
    """A kept getattr in a loop: a changed `continue` decides only whether it runs when every input is
    made afresh each iteration; where a name accumulates across iterations it decides the value."""
    fresh = textwrap.dedent("""
        def pick(obj, names):
            out = []
            for name in names:
                if not name:
                    continue
                out.append(getattr(obj, name, None))
            return out
        """).lstrip()
    assert screen(fresh, fresh.replace("if not name:", "if name is None:")) == []
    built = textwrap.dedent("""
        def pick(obj, parts):
            name = ""
            for part in parts:
                name = name + part
                if len(name) > 9:
                    break
                yield getattr(obj, name, None)
        """).lstrip()
    assert "computed argument" in screen(built, built.replace("> 9", "> 1"))[0]


def test_type_is_allowed_only_to_ask_about_a_value():
    """type(x) compared, used as a lookup key or asked for its name answers a question; type(cls) is
    type itself, which builds an always-equal class."""
    for ok in [
        "return type(w) is int",
        "return {int: 1}.get(0, {}).get(type(w).__name__)",
        "return isinstance(w, type)",
        "return type(w)()",  # a fresh value of w's type; when w is a class, type() fails
        "return type(None) in (type(w),)",
    ]:
        assert screen(SRC, SRC.replace("return 0", ok)) == [], ok
    for bad in ["return type(int)", "t = type(w)\n            return t", "return [type][0](w)", "return type(w)(h)"]:
        assert screen(SRC, SRC.replace("return 0", bad)), bad


def test_only_names_the_file_defines_once_at_top_level_count_as_defined():
    """A def under `if`, a name rebound, an import, a value that reaches a capability: what it might be,
    read only where the function already read it. A single top-level assignment of a value that would
    pass the check as new code is as good as writing that value in the body."""
    base = (
        SRC
        + "\n\nif True:\n    def cond():\n        return 1\n\nVALUE = hyp(1, 2)\nLIMIT = 3\nOPEN = open\nN = 1\nN = 2\n"
    )
    assert screen(base, base.replace("return 0", "return LIMIT")) == []  # a literal constant
    assert screen(base, base.replace("return 0", "return VALUE")) == []  # a pure value
    assert "reads cond" in screen(base, base.replace("return 0", "return cond()"))[0]
    assert "OPEN" in screen(base, base.replace("return 0", "return OPEN('x')"))[0]
    assert "reads N" in screen(base, base.replace("return 0", "return N"))[0]
    star = "from os import *\n" + SRC  # os.open is bound as open: no builtin is what it seems
    assert "reads len" in screen(star, star.replace("return 0", "return len(w)"))[0]
    shadow = SRC + "\n\nlen = open\n"  # a builtin shadowed at module level is what the module binds
    assert "len" in screen(shadow, shadow.replace("return 0", "return len(w)"))[0]


def test_changed_functions_names_each_patched_function_with_its_lines():
    after = SRC.replace("w * h", "h * w").replace("a * a + b * b", "b * b + a * a")
    assert changed_functions(SRC, after) == [("Box.area", (5, 8), (5, 8)), ("hyp", (11, 12), (11, 12))]
    decorated = SRC.replace("    def area", "    @property\n    def area")
    moved = decorated.replace("return 0", "w = 0\n            return w")
    assert changed_functions(decorated, moved) == [("Box.area", (5, 9), (5, 10))]
    assert changed_functions(SRC, SRC.replace("return 0", "return 0  # same code")) == []


def test_refusal_benchmark_tiny_mode_compares_with_the_previous_check(tmp_path):
    """benchmarks/patch_check_refusals.py --tiny: the gold patches of mutants of two repository files,
    screened by this check and by the previous one (read from git), with the refusals by category."""
    root = Path(__file__).resolve().parents[2]
    out = subprocess.run(
        [sys.executable, "benchmarks/patch_check_refusals.py", "--tiny", "--json", str(tmp_path / "r.json")],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    tiny = json.loads((tmp_path / "r.json").read_text())["tiny"]
    assert tiny["mutants"] == 60 and 0 <= tiny["refused"] <= 60
    assert sum(tiny["categories"].values()) >= tiny["refused"]  # every refusal has at least one reason
    total = next(line for line in out.stdout.splitlines() if line.startswith("TOTAL")).split()
    assert int(total[2]) == tiny["refused"] and total[3] == f"{100 * tiny['refused'] / 60:.1f}%"
    if "no baseline column" not in out.stdout:  # git and the baseline commit are there
        assert int(total[4]) == tiny["refused_baseline"] and len(total) == 6
