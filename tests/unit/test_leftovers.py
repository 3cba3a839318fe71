"""Proposals from what a removed statement leaves behind (graph_planner.leftovers: a name defined and never used,
an emptied method its siblings show delegating) and from removed idioms (graph_planner.idioms: a default, a
one-or-many normalisation, an iterator), each beside an honest control: the intact code, or code where the
trace is absent, gets no such proposal or is not promoted."""

from __future__ import annotations

from graph_planner.candidates import gold_reachable
from graph_planner.defects import pointed

from .test_defects import _proposals, _rank

CHUNKED = '''def chunked(iterable, n, strict=False):
    """Lists of n items."""
    iterator = iter(lambda: list(zip(range(n), iterable)), [])
    if strict:

        def ret():
            for chunk in iterator:
                if len(chunk) != n:
                    raise ValueError("not divisible")
                yield chunk

        return ret()
    else:
        return iterator
'''


def test_a_nested_function_never_called_is_returned_where_it_was_defined():
    buggy = CHUNKED.replace("\n        return ret()\n", "\n")
    assert gold_reachable("m.py", "chunked", buggy, CHUNKED)
    assert _rank(buggy, "chunked", CHUNKED) < 4
    assert any(pointed(p[2]) for p in _proposals(buggy, "chunked"))  # the rule agent tries it before token edits
    # control: intact, `ret` is called, so nothing proposes calling it
    assert not [p for p in _proposals(CHUNKED, "chunked") if "unused `ret`" in p[2]]


LOCKED = """class Locked:
    def __init__(self, it, lock):
        self._it = it
        self._lock = lock

    def __next__(self):
        with self._lock:
            return next(self._it)

    def send(self, value):
        with self._lock:
            return self._it.send(value)

    def throw(self, *args):
        with self._lock:
            return self._it.throw(*args)
"""


def test_an_emptied_method_hands_its_call_on_like_its_siblings():
    buggy = LOCKED.replace("            return self._it.send(value)", "            pass")
    assert gold_reachable("m.py", "Locked.send", buggy, LOCKED)
    assert _rank(buggy, "Locked.send", LOCKED) == 0
    # control: the sibling `throw` is intact, so it gets no delegation
    assert not [p for p in _proposals(LOCKED, "Locked.throw") if p[2].startswith("delegate ")]


RESULT = """class Result:
    def __init__(self, parser, string, pos, endpos):
        self.parser = parser
        self.string = string
        self.pos = pos
        self.endpos = endpos

    def __repr__(self):
        return f"<Result {self.string[self.pos:self.endpos]!r}>"
"""


def test_an_unused_constructor_parameter_is_stored_in_its_order_but_not_promoted():
    buggy = RESULT.replace("        self.pos = pos\n", "")
    assert gold_reachable("m.py", "Result.__init__", buggy, RESULT)
    assert _rank(buggy, "Result.__init__", RESULT) == 0  # after `self.string = string`, as the signature orders
    # intact code leaves parameters unused all the time (an interface's signature): never promoted
    assert not any(pointed(p[2]) for p in _proposals(buggy, "Result.__init__"))
    assert not [p for p in _proposals(RESULT, "Result.__init__") if "unused" in p[2]]


def test_only_a_parameter_named_to_be_called_is_called_with_the_others():
    do = 'def do(func, x):\n    """Run func(x), return x."""\n    func(x)\n    return x\n'
    buggy = do.replace("    func(x)\n", "")
    assert _rank(buggy, "do", do) == 0
    # control: an unused `colwidths` beside other parameters is data, not a function to call
    fmt = "def fmt(colwidths, cells):\n    return [c.strip() for c in cells]\n"
    assert not [p for p in _proposals(fmt, "fmt") if "colwidths(" in p[2]]
    assert [p for p in _proposals(fmt, "fmt") if "unused `colwidths`" not in p[2]] == _proposals(fmt, "fmt")


TIMES = """import datetime as dt


def _now():
    return dt.datetime.now()


def delta_since(value, now=None):
    if not now:
        now = _now()
    return now - value
"""


def test_a_parameter_left_out_gets_the_module_call_named_like_it():
    buggy = TIMES.replace("    if not now:\n        now = _now()\n", "")
    assert gold_reachable("m.py", "delta_since", buggy, TIMES)
    assert _rank(buggy, "delta_since", TIMES) is not None
    # control: a parameter no module function is named like gets no such default
    other = buggy.replace("now", "later").replace("_later", "_now")
    assert not [p for p in _proposals(other, "delta_since") if p[2].startswith("default ")]


def test_one_string_is_one_item_and_next_needs_an_iterator():
    pop = "def pop_all(d, keys):\n    if isinstance(keys, str):\n        keys = [keys]\n    for k in keys:\n        d.pop(k)\n"
    buggy = pop.replace("    if isinstance(keys, str):\n        keys = [keys]\n", "")
    assert _rank(buggy, "pop_all", pop) is not None
    first = "def first(seq):\n    seq = iter(seq)\n    return next(seq)\n"
    assert _rank(first.replace("    seq = iter(seq)\n", ""), "first", first) is not None
    # control: a parameter nothing calls `next` on is not made an iterator
    assert not [p for p in _proposals("def total(seq):\n    return sum(seq)\n", "total") if "iter(" in p[2]]


def test_a_branch_emptied_after_its_mirror_says_the_opposite_word():
    when = """def when(days):
    if days == 1:
        return "tomorrow"
    if days == -1:
        return "yesterday"
    return "some day"
"""
    buggy = when.replace('        return "yesterday"', "        pass")
    assert _rank(buggy, "when", when) < 4
    # control: intact, no branch is empty
    assert not [p for p in _proposals(when, "when") if p[2].startswith("emptied branch")]


def test_a_branch_lacking_a_binding_gets_what_its_sibling_gives_another_name_in_the_siblings_place():
    span = """def span(value, now):
    if isinstance(value, float):
        date = value
        delta = now - value
    else:
        date = now - value
        delta = value
    return date, delta
"""
    buggy = span.replace("        date = now - value\n", "")
    assert _rank(buggy, "span", span) < 8


def test_a_bound_method_kept_in_a_local_is_named_for_what_it_is():
    keep = "def keep(items, pred):\n    cache = []\n    cache_append = cache.append\n    for x in items:\n"
    keep += "        if pred(x):\n            cache_append(x)\n    return cache\n"
    buggy = keep.replace("    cache_append = cache.append\n", "")
    # behind the never-filled `cache` (only its alias fills it), within a menu of 32
    assert _rank(buggy, "keep", keep) < 32
    # control: `cache_append` bound, no binding is proposed for it
    assert not [p for p in _proposals(keep, "keep") if "`cache_append`" in p[2]]
    # a keyword is no attribute: `get_in` beside a local `get` is not `get.in` (this crashed the enumeration)
    assert _proposals("def f(get):\n    return get_in(get)\n", "f")
    assert _proposals("def f(x):\n    return x_1(x)\n", "f")
