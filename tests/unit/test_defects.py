"""Proposals from defects the function's own code shows (graph_planner.defects), each beside an honest control:
the same code intact, where the defect is absent, gets no such proposal."""

from __future__ import annotations

import ast
import textwrap

from graph_planner.candidates import function_text, gold_reachable
from graph_planner.definite import definite, unsafe_read
from graph_planner.proposals import repository_proposals

PAD = """def _padleft(width, s):
    return s.rjust(width)


def _padright(width, s):
    return s.ljust(width)


def _padboth(width, s):
    return s.center(width)


def choose(strings, alignment):
    if alignment == "right":
        strings = [s.strip() for s in strings]
        padfn = _padleft
    elif alignment == "center":
        strings = [s.strip() for s in strings]
        padfn = _padboth
    else:
        padfn = _padright
    return strings, padfn
"""


def _proposals(module: str, function: str) -> list[tuple]:
    first, source = function_text(module, function)
    return repository_proposals(textwrap.dedent(source), module, first)


def _rank(module: str, function: str, fixed: str) -> int | None:
    """Where the gold-fixed function sits among the proposals (what a menu cap keeps), or None."""
    want = ast.dump(ast.parse(textwrap.dedent(function_text(fixed, function)[1])))
    found = _proposals(module, function)
    return next((k for k, (*_, new) in enumerate(found) if ast.dump(ast.parse(textwrap.dedent(new))) == want), None)


def test_a_branch_that_lost_its_binding_gets_it_back_with_a_sibling_of_the_same_stem():
    buggy = PAD.replace("        padfn = _padboth\n", "")
    assert gold_reachable("m.py", "choose", buggy, PAD)
    assert _rank(buggy, "choose", PAD) < 16  # first among the proposals: the code points at it
    # control: intact, every branch binds `padfn`, so nothing is proposed for it
    assert not [p for p in _proposals(PAD, "choose") if "path that lacks it" in p[2]]


def test_definite_assignment_follows_branches_loops_and_handlers():
    def unsafe(code: str, name: str) -> bool:
        return unsafe_read(ast.parse(textwrap.dedent(code)).body, name) is not None

    assert not unsafe("if a:\n    x = 1\nelse:\n    x = 2\nprint(x)\n", "x")
    assert unsafe("if a:\n    x = 1\nelif b:\n    pass\nelse:\n    x = 2\nprint(x)\n", "x")
    assert not unsafe("if a:\n    x = 1\nelse:\n    raise ValueError\nprint(x)\n", "x")  # the other path leaves
    assert not unsafe("try:\n    x = f()\nexcept E:\n    x = None\nprint(x)\n", "x")
    assert unsafe("try:\n    x = f()\nexcept E:\n    pass\nprint(x)\n", "x")
    assert not unsafe("for x in xs:\n    print(x)\n", "x")  # the loop target, inside the loop
    assert unsafe("for y in ys:\n    x = y\nprint(x)\n", "x")  # a loop may run no time at all
    assert not unsafe("with open(p) as x:\n    print(x)\n", "x")
    assert not unsafe("ys = [x for x in xs]\nx = 1\nprint(x)\n", "x")  # a comprehension's own target
    assert not unsafe("if (x := f()):\n    print(x)\n", "x")  # a walrus binds in the function
    assert definite([ast.parse("return 1").body[0]], "x")  # nothing runs after a return


COUNT = """import collections


def frequencies(seq):
    d = collections.defaultdict(int)
    for item in seq:
        d[item] += 1
    return dict(d)


def interleave(a, b):
    out = []
    for x, y in zip(a, b):
        out.append(x)
        out.append(y)
    return out


def collect(seq, sink):
    out = []
    for item in seq:
        sink(out, item)
    return out
"""


def test_a_container_created_empty_and_never_filled_is_filled_in_its_loop():
    buggy = COUNT.replace("        d[item] += 1\n", "        pass\n")
    assert gold_reachable("m.py", "frequencies", buggy, COUNT)
    assert _rank(buggy, "frequencies", COUNT) < 16
    # controls: a list filled by `append` and one handed to a function that may fill it get no such proposal
    assert not [p for p in _proposals(COUNT, "interleave") if p[2].startswith("fill ")]
    assert not [p for p in _proposals(COUNT, "collect") if p[2].startswith("fill ")]


ALIGN = """def align(text_lines, blank, where):
    if where == "top":
        return text_lines + blank
    elif where == "bottom":
        return blank + text_lines
    return text_lines


def build(cells, widths, fmt):
    if callable(fmt):
        return fmt(cells, widths)
    else:
        return _simple(cells, fmt)


def _simple(cells, fmt):
    return fmt.join(cells)


def kind(value):
    if isinstance(value, int):
        return int
    elif isinstance(value, float):
        return float
    else:
        return str
"""


def test_an_emptied_branch_gets_its_siblings_statement_mirrored_or_a_callable_called():
    for old, new, function in (
        ("        return blank + text_lines\n", "        pass\n", "align"),  # the top branch mirrored
        ("        return fmt(cells, widths)\n", "        pass\n", "build"),  # `callable(fmt)` says: call it
        ("        return float\n", "        pass\n", "kind"),  # a sibling's builtin type swapped
    ):
        buggy = ALIGN.replace(old, new)
        assert gold_reachable("m.py", function, buggy, ALIGN), function
        assert _rank(buggy, function, ALIGN) < 16, function
    # control: no emptied branch, no such proposal
    assert not [p for p in _proposals(ALIGN, "align") if p[2].startswith("`pass` -> ")]


GUARDS = """class Finder:
    def __init__(self, pattern, text):
        self.pattern, self.text, self.pos = pattern, text, 0

    def __iter__(self):
        return self

    def __next__(self):
        m = self.pattern.search(self.text, self.pos)
        if m is None:
            raise StopIteration()
        self.pos = m.end()
        return m.group(0)

    def __get__(self, instance, owner):
        if instance is None:
            return self
        return bound(self, instance)


def bound(f, obj):
    return (f, obj)
"""


def test_a_removed_none_guard_is_proposed_after_the_call_that_may_return_none():
    for guard, function in (
        ("        if m is None:\n            raise StopIteration()\n", "Finder.__next__"),
        ("        if instance is None:\n            return self\n", "Finder.__get__"),
    ):
        buggy = GUARDS.replace(guard, "")
        assert gold_reachable("m.py", function, buggy, GUARDS), function
        assert _rank(buggy, function, GUARDS) < 16, function


def test_an_unbound_name_may_be_a_literal_the_module_repeats_times_a_related_name():
    module = 'def rule(w):\n    return "-" * w\n\n\ndef pad_row(cells, padding):\n    pad = " " * padding\n'
    module += "    return [pad + c + pad for c in cells]\n\n\ndef blank(n):\n    return ' ' * n\n"
    buggy = module.replace('    pad = " " * padding\n', "")
    assert gold_reachable("m.py", "pad_row", buggy, module)


def test_the_rule_agent_tries_first_two_proposals_a_defect_points_at_and_no_more():
    """A function whose code shows a defect gets its first two pointed proposals tried before any token edit
    (the rule agent's budget is a handful of test runs); an intact function's menu keeps proposals last."""
    from graph_planner.agents.rule import RuleAgent
    from graph_planner.candidates import function_menu

    tally = "import collections\n\n\ndef tally(seq, limit):\n    d = collections.defaultdict(int)\n"
    tally += "    for item in seq[:limit]:\n        d[item] += 1\n    return dict(d) if len(d) > 1 else {}\n"
    buggy = tally.replace("        d[item] += 1\n", "        pass\n")
    agent = RuleAgent(proposals=40)
    agent.begin({"problem_statement": "", "failing_tests": ["t.py::test_tally"]})
    first, source = function_text(buggy, "tally")
    order = agent.order([("m.py", function_menu("m.py", first, source, module=buggy, proposals=40))])
    assert [c.proposed for c in order[:3]] == [True, True, False]
    assert buggy.replace(order[0].edit["old"], order[0].edit["new"], 1) == tally
    # control: the intact function shows no defect, so a token edit comes first
    first, source = function_text(tally, "tally")
    intact = agent.order([("m.py", function_menu("m.py", first, source, module=tally, proposals=40))])
    assert not intact[0].proposed


def test_the_likeliest_proposal_of_each_defect_comes_first():
    """The order is what a menu cap and the rule agent's budget keep: the sibling name the function never reads
    (`_padboth`), the branch facing the emptied one mirrored (the `else` of a "bottom" test is the top), the
    value the loop just made."""
    assert _rank(PAD.replace("        padfn = _padboth\n", ""), "choose", PAD) == 0
    vertical = (
        'def valign(lines, blank, where):\n    if where == "bottom":\n        return blank + lines\n'
        '    elif where == "center":\n        return blank + lines + blank\n    else:\n        return lines + blank\n'
    )
    assert _rank(vertical.replace("        return blank + lines\n", "        pass\n", 1), "valign", vertical) == 0
    upper = (
        "def uppers(words):\n    out = []\n    for word in words:\n        big = word.upper()\n"
        "        if big not in out:\n            out.append(big)\n    return out\n"
    )
    assert _rank(upper.replace("            out.append(big)\n", "            pass\n"), "uppers", upper) == 0
