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


# --- review 22 (2026-12-02): what a `find` action may carry ---


def _search(tmp_path):
    from graph_planner.graph import GraphSearch, RepoGraph

    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "mod.py").write_text(BASE + "\n\ndef scale(xs, k):\n    return [x * k for x in xs]\n")
    return GraphSearch(RepoGraph(tmp_path))


def test_a_traceback_frame_with_a_huge_line_number_finds_nothing_and_raises_nothing(tmp_path):
    search = _search(tmp_path)
    for frame in ('File "pkg/mod.py", line {n}, in total', "pkg/mod.py:{n}: AssertionError"):
        assert search.by_traceback(frame.format(n="1" * 5000)) == []
        assert search.by_traceback(frame.format(n=2)) == [("pkg/mod.py::total", 1.0)]  # the honest frame


def test_a_candidates_request_is_bounded_beside_an_honest_one():
    """Explore(candidates) is model output too: a request for more proposals than the cap (each costs the
    environment work) is malformed, counted, never run; the honest request parses."""
    from graph_planner.env_config import MAX_PROPOSALS

    for bad in (MAX_PROPOSALS + 1, -1, 10**12, "all"):
        with pytest.raises(ActionError):
            parse_action({"type": "explore", "op": "candidates", "nodes": ["m.py::f"], "proposals": bad})
    with pytest.raises(ActionError):  # at most 10 nodes a step, as for read
        parse_action({"type": "explore", "op": "candidates", "nodes": [f"m.py::f{i}" for i in range(11)]})
    ok = parse_action({"type": "explore", "op": "candidates", "nodes": ["m.py::f"], "proposals": MAX_PROPOSALS})
    assert ok.op == "candidates" and ok.proposals == MAX_PROPOSALS


def test_a_find_anchor_is_bounded_and_the_text_search_walks_only_the_query_words_postings(tmp_path):
    from graph_planner.actions import MAX_ANCHOR_CHARS
    from graph_planner.graph.search import BM25, tokens

    with pytest.raises(ActionError, match="at most 20000 characters"):
        parse_action({"type": "explore", "op": "find", "anchors": ["x" * (MAX_ANCHOR_CHARS + 1)]})
    assert parse_action({"type": "explore", "op": "find", "anchors": ["total " * 3000]}).anchors
    # The postings walk gives every document the same float sum, word by word in sorted order, as the
    # document-by-document loop did (so ties, and rankings, are unchanged); words no document holds cost nothing
    # (the loop cost documents x words: 11 s for one 100 KB anchor over _pytest's 2,160 documents).
    docs = {f"d{i}": tokens(f"alpha beta{i % 7} gamma{i % 13} delta{i}") * (1 + i % 3) for i in range(500)}
    bm25 = BM25(docs)
    query = tokens("beta3 gamma5 alpha delta17 missing") + [f"w{i}" for i in range(2_000)]
    reference = {}
    for d, tf in bm25.tf.items():
        s = 0.0
        for w in sorted(set(query)):
            if tf.get(w, 0):
                f = tf[w]
                s += bm25.idf[w] * f * (bm25.k1 + 1) / (f + bm25.k1 * (1 - bm25.b + bm25.b * bm25.len[d] / bm25.avg))
        if s > 0:
            reference[d] = s
    assert bm25.scores(query) == reference and set(bm25.postings) == {w for ws in docs.values() for w in ws}


def test_a_workflow_line_nested_too_deep_ends_the_workflow_instead_of_passing_for_a_closed_loop():
    import io
    from types import SimpleNamespace

    from aflow_rl.workflow_box import SandboxedWorkflow

    box = object.__new__(SandboxedWorkflow)
    box.box = SimpleNamespace(proc=SimpleNamespace(stdout=io.BytesIO(b"[" * 100_000 + b"\n" + b'{"done": 1}\n')))
    assert box._read_line() == {}  # read as the end of the workflow's output: its problems fail, nothing hangs
    assert box._read_line() == {"done": 1}


def test_a_lone_surrogate_in_a_patched_file_is_a_reason_not_a_unicode_error():
    assert screen(BASE, FIXED.replace("+", "+ 0 +  # \ud800"), bodies=False) == [
        "holds a lone surrogate, which no UTF-8 file can hold"
    ]
    assert screen(BASE, FIXED, bodies=False) == []
