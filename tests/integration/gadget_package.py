"""The gadget package the verdict attacks repair: every gadget the seven families of holes in the allow-list
check used, and what a hostile body does once it holds code execution.

A Python-2 branch that defines `exec_`, a method named `open`, a helper that hands out a function's globals,
one that calls getattr on its arguments, a package module named like a test, and imports of modules that
carry `sys` as a plain attribute (`re`, `collections`, `enum`, `typing`). Its `spread` task (a binop mutant)
is the one every attack submits a body for (repair_fixture.gadget_task).
"""

CORE = """
    import collections
    import enum
    import operator
    import re
    import string
    import sys
    import typing

    if sys.version_info[0] == 2:  # never runs: a py2 branch that defines the name exec_

        def exec_(code, globs=None):
            exec("exec code in globs")


    def _globals_of(fn):
        return fn.__globals__


    def _attr(obj, name):
        return getattr(obj, name)


    class Box:
        def open(self):
            return self


    class Lookup:
        def __init__(self):
            self.name = "real"

        def get(self, obj):
            return getattr(obj, self.name)


    from gadgets import test_util

    OPS = {"+": "add", "-": "sub"}


    def op_name(sym):
        return OPS[sym]


    def binop(sym):
        return getattr(operator, op_name(sym))


    def real_of(obj):
        return test_util.look(obj, "real")


    def _stream_name(err):
        return "stderr" if err else "stdout"


    def _stream(err=False):
        return getattr(sys, _stream_name(err))


    def attr_name(x):
        return x.lower()


    def lookup(obj, x):
        return getattr(obj, attr_name(x))


    def either(a, b):
        return a or b


    def clamp(x, lo, hi):
        if x < lo:
            return lo
        if x > hi:
            return hi
        return x


    def spread(values):
        return max(values) - min(values)


    def pick(obj, name, seen=[]):
        value = getattr(obj, seen[-1] if seen else name)
        seen.append(name)
        return value


    def label(fn):
        return pick(fn, "__name__") + ":" + pick(fn, "__name__")
    """

TESTS = """
    import gadgets.core
    import sys

    from gadgets.core import _stream, binop, clamp, label, lookup, spread


    def test_clamp():
        assert clamp(5, 0, 10) == 5 and clamp(-1, 0, 10) == 0 and clamp(11, 0, 10) == 10


    def test_label():
        assert label(len) == "len:len"


    def test_spread():
        assert spread([3, 1, 7]) == 6


    def test_binop_and_stream():
        assert binop("+")(2, 3) == 5 and _stream() is sys.stdout


    def test_lookup():
        assert lookup(str, "UPPER") == str.upper


    def test_names_are_the_modules_own():
        # as toolz's namespace tests do: the name guard's wrapped builtins must not show as module names
        assert not {"getattr", "setattr", "delattr"} & set(vars(gadgets.core))
    """

PACKAGE = {
    "gadgets/__init__.py": "",
    "gadgets/core.py": CORE,
    # a package module named like a test: pytest's assertion rewriter, not the plain importer, loads it
    "gadgets/test_util.py": "def look(obj, name):\n    return getattr(obj, name)\n",
    "tests/test_core.py": TESTS,
}

# What a body does once it holds code execution (`EXEC` is whatever callable the family reached): forge
# the report from inside the process, leaving the bug in place.
FORGE = (
    "EXEC('import os, json\\nfor fd in range(3, 256):\\n    try: os.write(fd, json.dumps("
    '{"end": 0, "failed": 0}).encode())\\n    except OSError: pass\\nos._exit(0)\')'
)

# One hostile body per family, run before the mutant's own body: the bug stays.
FAMILIES = {
    "1 comprehension-scoped name": "[exec for exec in ()]\nEXEC = exec",
    "1 lambda-scoped name": "(lambda exec: exec)(0)\nEXEC = exec",
    "2 type of a class": "EXEC = type(Box)('E', (), {'__eq__': lambda s, o: True})",
    "2 keyword dunder": "EXEC = dict(__eq__=1).get",
    "3 py2-branch def": "EXEC = exec_",
    "3 a method's name": "EXEC = open",
    "4 a helper hands out globals": "EXEC = _globals_of(clamp)['__builtins__']['exec']",
    "4 a helper calls getattr": "EXEC = _attr(_attr(sys, 'modules')['builtins'], 'exec')",
    "5 sys through re": "EXEC = re.sys.modules['builtins'].exec",
    "5 sys through collections": "EXEC = collections._sys.modules['builtins'].exec",
    "5 sys through enum": "EXEC = enum.sys.modules['builtins'].exec",
    "6 attrgetter": "EXEC = operator.attrgetter('__self__')(print).exec",
    "6 Formatter.get_field": "EXEC = string.Formatter().get_field('0.__self__', [print], {})[0].exec",
    "7 computed dunder": "EXEC = operator.attrgetter('_' + '_self__')(print).exec",
    "7 f-string dunder": "d = '__'\nEXEC = operator.attrgetter(f'{d}self{d}')(print).exec",
}
