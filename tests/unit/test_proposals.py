"""Proposed statements for removed statements and removed `if` blocks (graph_planner.proposals)."""

from textwrap import dedent

from graph_planner.candidates import (
    candidate_edits,
    function_menu,
    function_text,
    gold_reachable,
    gold_source,
    same_function,
)
from graph_planner.proposals import free_names, model_proposals, repository_proposals

MODULE = """import os

LIMIT = 10


class Counter:
    def __init__(self, start):
        self.count = start
        self.seen = []

    def add(self, item):
        if item is None:
            return self.count
        self.seen.append(item)
        self.count += 1
        return self.count

    def extend(self, items):
        for item in items:
            self.seen.append(item)
            self.count += 1
        if self.count > LIMIT:
            self.count = LIMIT
        return self.count


def other(path):
    value = os.path.basename(path)
    return value
"""


def _broken(old: str, new: str) -> str:
    assert old in MODULE
    return MODULE.replace(old, new, 1)


def test_a_removed_statement_repeated_elsewhere_in_the_module_is_proposed_and_reaches_the_gold_fix():
    # `extend` lost `self.count += 1`; `add` holds the same statement, so the module proposes it back.
    buggy = _broken(
        "            self.seen.append(item)\n            self.count += 1\n", "            self.seen.append(item)\n"
    )
    assert gold_reachable("m.py", "Counter.extend", buggy, MODULE)
    assert not gold_reachable("m.py", "Counter.extend", buggy, MODULE, proposals=False)
    first, source = function_text(buggy, "Counter.extend")
    cands = candidate_edits("m.py", first, source, structural=True, module=buggy)
    fix = [
        c
        for c in cands
        if c.kind == "remove_stmt" and same_function(c.edit["new"], function_text(MODULE, "Counter.extend")[1])
    ]
    assert len(fix) == 1 and "self.count += 1" in fix[0].description
    # The edit is an ordinary {file, old, new} replacement of the whole function in the file.
    assert buggy.replace(fix[0].edit["old"], fix[0].edit["new"], 1) == MODULE


def test_a_removed_if_block_and_an_early_return_are_proposed_only_where_they_may_have_been():
    # `discard` lost the guard `add` has; the block comes back whole, as a `remove_if` candidate.
    fixed = (
        MODULE
        + "\n\ndef discard(self, item):\n    if item is None:\n        return self.count\n    self.seen.remove(item)\n"
    )
    buggy = fixed.replace(
        "    if item is None:\n        return self.count\n    self.seen.remove", "    self.seen.remove"
    )
    assert gold_reachable("m.py", "discard", buggy, fixed)
    first, source = function_text(buggy, "discard")
    kinds = {c.kind for c in candidate_edits("m.py", first, source, structural=True, module=buggy)}
    assert {"remove_if", "remove_stmt"} <= kinds
    # A `return` is proposed only inside a nested block, never among the function's own statements.
    for _, _, _, new in repository_proposals(source, buggy, first):
        assert sum(ln.startswith("    return") for ln in new.splitlines()) <= 1


def test_proposals_read_only_names_bound_where_they_are_inserted():
    # `value` and `path` are bound only in `other`: its statements are never proposed inside Counter.add.
    body = "def add(self, item):\n    self.seen.append(item)\n    return self.count\n"
    props = repository_proposals(body, MODULE, 11)
    assert props and not any("basename" in d or "value" in d for _, _, d, _ in props)
    assert free_names(__import__("ast").parse("x = [y for y in z]")) == {"z"}


def test_model_proposals_take_the_first_complete_statement_and_drop_what_is_already_there():
    body = "def f(xs):\n    total = 0\n    for x in xs:\n        pass\n    return total\n"
    seen = []

    def generate(prompt: str) -> str:
        seen.append(prompt)
        if prompt.endswith("for x in xs:\n        "):
            return "total += x\n    return total\n"  # replaces the lone `pass`
        if prompt.endswith("total = 0\n    "):
            return "for x in xs:\n        pass\n"  # what is already there: no proposal
        return "this is not python (\n"

    props = model_proposals(body, "import os\n", generate)
    assert all(p.startswith("import os\n") for p in seen)
    assert [(k, line) for k, line, _, _ in props] == [("remove_stmt", 4)]
    assert "        total += x\n" in props[0][3] and "pass" not in props[0][3]


def test_a_changed_default_is_changed_back_from_its_literal_or_from_a_same_named_parameter():
    module = (
        'def to_str(s, errors="ignore", strict=False, depth=2):\n    return s\n\n\n'
        "def clean(s, errors=None, strict=True, depth=3):\n    return to_str(s, errors)\n"
    )
    fixed = module.replace("errors=None", 'errors="ignore"')
    assert gold_source("m.py", "clean", module, fixed) == "repository"  # None had lost its value
    assert gold_source("m.py", "clean", module, module.replace("strict=True", "strict=False")) == "inverse"
    assert gold_source("m.py", "clean", module, module.replace("depth=3", "depth=2")) == "inverse"
    assert gold_source("m.py", "clean", module, module.replace("depth=3", "depth=7")) == ""


def test_hostile_model_text_is_dropped_or_becomes_an_edit_the_patch_check_refuses():
    """What a model writes is parsed, never run here: text that breaks the parser (a null byte, nesting
    deep enough to exhaust it, a megabyte of junk) gives no proposal and no crash; a statement that
    reaches for the system or the verdict is only an edit, and the patch check refuses it."""
    from graph_planner.patch_check import screen

    body = "def f(xs):\n    total = 0\n    for x in xs:\n        total += x\n    return total\n"
    for junk in (
        "total = 1\x00\n",
        "x = " + "(" * 200 + "1" + ")" * 200 + "\n",
        "-" * 100_000 + "1\n",
        "a" * 1_000_000,
    ):
        assert all(new != body for *_, new in model_proposals(body, "", lambda prompt, j=junk: j))
    attacks = [
        "__import__('os').system('touch /tmp/pwned')\n",
        "open('/proc/self/fd/3', 'w').write('passed')\n",
        "import sys; sys.exit(0)\n",
    ]
    made = [model_proposals(body, "", lambda prompt, a=attack: a) for attack in attacks]
    assert [len(m) for m in made] == [5, 5, 0]  # one proposal per gap; two statements on a line are not one
    for *_, new in made[0] + made[1]:
        assert screen(body, new), new  # refused: never reaches a test run


def test_one_menu_lists_token_edits_then_inverses_then_at_most_n_proposals():
    """What the team and the rule agent rank (candidates.function_menu): the repository proposals come only with
    the module's text and a cap, after the function's own edits, marked, and the gold fix among them."""
    from graph_planner.candidates import function_menu

    buggy = _broken(
        "            self.seen.append(item)\n            self.count += 1\n", "            self.seen.append(item)\n"
    )
    first, source = function_text(buggy, "Counter.extend")
    plain = function_menu("m.py", first, source)
    assert plain == candidate_edits("m.py", first, source, structural=True) and not any(c.proposed for c in plain)
    assert not any(same_function(c.edit["new"], function_text(MODULE, "Counter.extend")[1]) for c in plain)
    menu = function_menu("m.py", first, source, module=buggy, proposals=40)
    assert menu[: len(plain)] == plain and 0 < len(menu) - len(plain) <= 40
    assert all(c.proposed for c in menu[len(plain) :])
    assert any(same_function(c.edit["new"], function_text(MODULE, "Counter.extend")[1]) for c in menu)
    assert len(function_menu("m.py", first, source, module=buggy, proposals=3)) <= len(plain) + 3


def test_the_rule_agent_tries_one_token_edits_then_inverses_then_proposals_whatever_the_traceback():
    """A proposal on a traceback line still waits behind every inverse of a lower-ranked function: hundreds of
    them must never push a negated condition out of the test budget."""
    from graph_planner.agents.rule import RuleAgent
    from graph_planner.candidates import Candidate

    def cand(kind, line, one_token=False, proposed=False):
        return Candidate(
            kind, line, f"{kind}@{line}", {"file": "m.py", "old": "", "new": f"{kind}{line}"}, one_token, proposed
        )

    agent = RuleAgent(proposals=4)
    agent.trace_lines = {("m.py", 3)}
    top = [cand("remove_stmt", 3, proposed=True), cand("comparison", 5, one_token=True), cand("negate_if", 4)]
    second = [cand("negate_if", 9), cand("binop", 8, one_token=True)]
    order = [c.description for c in agent.order([("m.py", top), ("m.py", second)])]
    assert order == ["comparison@5", "binop@8", "negate_if@4", "negate_if@9", "remove_stmt@3"]


UNBOUND = """def letters(text):
    chars = []
    for c in text:
        if c.isalpha():
            chars.append(c)
    return "".join(chars)


def first(items):
    for item in items:
        if item:
            return item
    return None
"""


def test_a_removed_assignment_whose_name_is_read_unbound_is_bound_again_before_its_first_read():
    # `letters` lost `chars = []`: `chars` is read and bound nowhere (the code would raise NameError), and no
    # other statement of the module binds it, so only the unbound-name grammar can give the fix back.
    buggy = UNBOUND.replace("    chars = []\n", "", 1)
    assert gold_reachable("m.py", "letters", buggy, UNBOUND)
    first, source = function_text(buggy, "letters")
    binds = [d for _, _, d, _ in repository_proposals(source, buggy, first) if d.startswith("bind unbound `chars`")]
    # the nearest gap first (just before `chars.append`, the first read), then the gaps of each block around it
    # up to the function's first line; literals are among the first values tried at each
    assert binds[0] == "bind unbound `chars` at line 4: []"
    # `chars.append(c)` says it was a list: `[]` is tried at every place before any other value
    assert binds[:3] == [f"bind unbound `chars` at line {n}: []" for n in (4, 3, 2)]
    assert {d.split(":")[0][-2:] for d in binds} == {" 2", " 3", " 4"}
    assert "bind unbound `chars` at line 2: []" in binds


def test_a_lone_pass_is_turned_into_a_return_of_one_of_the_functions_own_names():
    # `first` lost `return item` (the removal left `pass`): returning the loop's local fixes it.
    buggy = UNBOUND.replace("            return item\n", "            pass\n", 1)
    assert gold_reachable("m.py", "first", buggy, UNBOUND)
    first, source = function_text(buggy, "first")
    returns = [d for _, _, d, _ in repository_proposals(source, buggy, first) if "-> `return" in d]
    assert returns[:2] == ["`pass` -> `return item` at line 4", "`pass` -> `return items` at line 4"]


def test_code_with_no_unbound_read_and_no_lone_pass_gets_no_binding_or_return_proposals():
    # Honest control: the intact module shows neither defect, so the grammar proposes nothing.
    for name in ("letters", "first"):
        first, source = function_text(UNBOUND, name)
        descriptions = [d for _, _, d, _ in repository_proposals(source, UNBOUND, first)]
        assert not [d for d in descriptions if d.startswith("bind unbound") or "-> `return" in d]


def test_the_rule_agent_tries_first_the_binding_of_a_name_its_traceback_reports_undefined():
    """`NameError: name 'chars' is not defined` names the missing statement: its bindings go before any token
    edit; a binding of another name, and every binding when the error names nothing, keep their place last."""
    from graph_planner.agents.rule import RuleAgent

    buggy = UNBOUND.replace("    chars = []\n", "", 1)
    first, source = function_text(buggy, "letters")
    menu = function_menu("m.py", first, source, module=buggy, proposals=40)
    statement = "E   NameError: name 'chars' is not defined\n"
    told, untold = RuleAgent(proposals=40), RuleAgent(proposals=40)
    told.begin({"problem_statement": statement, "failing_tests": ["t.py::test_letters"]})
    untold.begin({"problem_statement": statement.replace("chars", "other"), "failing_tests": []})
    assert told.undefined == {"chars"}
    told_order, untold_order = told.order([("m.py", menu)]), untold.order([("m.py", menu)])
    assert told_order[0].description == "bind unbound `chars` at line 4: []"
    assert buggy.replace(told_order[0].edit["old"], told_order[0].edit["new"], 1).count("chars = []") == 1
    # honest control: the same menu, an error naming another variable: proposals stay behind every other edit
    assert not untold_order[0].proposed and untold_order[-1].proposed


CLASS = """import threading


class Cache:
    def __init__(self, size, timeout=1.0):
        self.size = size
        self.timeout = timeout
        self.items = {}

    def wait(self):
        return self.timeout * len(self.items) / self.size


class Guarded(threading.Thread):
    def __init__(self, size):
        self.size = size

    def report(self):
        return self.size, self.name
"""


def test_an_attribute_the_class_reads_and_never_sets_is_set_again_in_init():
    # Cache.__init__ lost `self.timeout = timeout`: `timeout` is now unused and `self.timeout` is set nowhere.
    buggy = CLASS.replace("        self.timeout = timeout\n", "", 1)
    assert gold_reachable("m.py", "Cache.__init__", buggy, CLASS)
    first, source = function_text(buggy, "Cache.__init__")
    binds = [d for _, _, d, _ in repository_proposals(dedent(source), buggy, first) if d.startswith("bind unset")]
    # the parameter of the attribute's own name is the first value tried, at every gap, the last one included
    assert binds[0] == "bind unset `self.timeout` at line 2: timeout"
    assert {d.split(":")[0] for d in binds} == {f"bind unset `self.timeout` at line {n}" for n in (2, 3, 4)}


def test_attributes_are_not_proposed_where_they_may_be_set_elsewhere():
    # honest controls: the intact Cache sets everything it reads; Guarded reads `self.name`, which its base
    # (a class of another module) may set, so nothing is proposed for it
    for cls in ("Cache", "Guarded"):
        first, source = function_text(CLASS, f"{cls}.__init__")
        proposed = repository_proposals(dedent(source), CLASS, first)
        assert proposed and not [d for _, _, d, _ in proposed if d.startswith("bind unset")]
