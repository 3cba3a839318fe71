"""Model output nested or sized to break the parsers that read it (review 21, 2026-12-01): each is now a scored,
counted reason, beside an honest reply of the same shape that still goes through.

Before: a reply holding JSON nested ~1,200 deep raised RecursionError out of `PlannerEnv.step` (and ended a whole
evaluation), a 5,000-digit number raised ValueError, a diff hunk header with a 5,000-digit line number raised
ValueError from `int()`; a free-form reply returning a 1,000-term sum passed the reply parser, then raised
RecursionError out of the patch check (`ast.dump`), a 10,000-term one out of the parser itself; and the action
regex took time quadratic in a reply of `{`s (12 s for 128,000 of them).
"""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from graph_planner.actions import ActionError, Submit, _json_text, parse_action
from graph_planner.free_edit import fence, parse_reply
from graph_planner.patch_check import screen
from graph_planner.patching import PatchError, apply_diff
from graph_planner.pyparse import MAX_DEPTH, depth, parse

FILE = "pkg/mod.py"
BASE = "def total(xs):\n    return xs[0] - xs[1]\n"
FIXED = "def total(xs):\n    return xs[0] + xs[1]\n"


def _sum(terms: int, term: str = "xs[0] + ") -> str:
    """`total` returning a left-nested sum of `terms` terms (its AST is ~`terms` levels deep)."""
    return "def total(xs):\n    return " + term * (terms - 1) + "xs[0]\n"


@pytest.mark.parametrize(
    "reply, why",
    [
        ('{"type": "submit", "x": ' + "[" * 1200 + "]" * 1200 + "}", "RecursionError"),
        ('{"type": "explore", "op": "expand", "hop": ' + "1" * 5000 + "}", "ValueError"),
        ("{" * 128_000, "no JSON object"),
        ("x" * 1_000_001, "over the 1000000"),
    ],
    ids=["json nested 1,200 deep", "a 5,000-digit int", "128,000 braces", "a reply over the limit"],
)
def test_actions_nested_or_sized_to_break_the_parser_are_action_errors(reply, why):
    with pytest.raises(ActionError, match=why):
        parse_action(reply)
    # the honest control beside it: an action in prose and fences, still read
    assert isinstance(parse_action('Done.\n```json\n{"type": "submit"}\n```'), Submit)


@settings(max_examples=300, deadline=None, derandomize=True)
@given(st.text(alphabet="{}ab\n ", max_size=40))
def test_the_json_span_is_what_the_greedy_regex_matched(text):
    m = re.search(r"\{.*\}", text, re.S)
    assert _json_text(text) == (m.group(0) if m else None)


def test_a_hunk_line_number_past_nine_digits_is_a_patch_error_not_a_crash():
    files = {FILE}
    diff = f"--- a/{FILE}\n+++ b/{FILE}\n@@ -{{}},2 +1,2 @@\n def total(xs):\n-    return xs[0] - xs[1]\n+    return xs[0] + xs[1]\n"
    assert apply_diff(diff.format(1), lambda p: BASE, files) == {FILE: FIXED}  # control
    with pytest.raises(PatchError, match="line number out of range"):
        apply_diff(diff.format("1" * 5000), lambda p: BASE, files)


@pytest.mark.parametrize("terms, term", [(1_000, "xs[0] + "), (10_000, "1+")])  # 3 and 20 KB: under the reply limit
def test_a_free_reply_nested_too_deeply_is_malformed_beside_an_honest_long_one(terms, term):
    deep = parse_reply(fence(_sum(terms, term)), FILE, BASE, "total")
    assert deep.edit is None and "does not parse: nested" in deep.error
    honest = parse_reply(fence(_sum(40)), FILE, BASE, "total")  # a long but ordinary expression
    assert honest.edit is not None and honest.edit["new"] == _sum(40)


def test_the_parser_turns_its_own_overflows_into_syntax_errors():
    for source in ("x = " + "-" * 10_000 + "1\n", "x = " + "lambda: " * 3_000 + "1\n", _sum(10_000)):
        with pytest.raises(SyntaxError, match="nested too deeply"):
            parse(source)


@pytest.mark.parametrize("bodies", [True, False], ids=["static check", "jailed task (structure only)"])
def test_the_patch_check_refuses_a_file_deeper_than_its_limit_and_does_not_overflow(bodies):
    assert depth(parse(_sum(MAX_DEPTH))) > MAX_DEPTH  # the deep file below is past the limit
    reasons = screen(BASE, _sum(1_000), bodies)
    assert reasons and f"nested deeper than {MAX_DEPTH} levels" in reasons[0]
    assert screen(BASE, FIXED, bodies) == []  # the honest fix passes beside it
