"""The code graph on a small repository written here: nodes, edges, anchors, expansion, memory budget."""

from __future__ import annotations

import textwrap

import pytest

from graph_planner.graph import Budget, GraphSearch, RepoGraph, WorkingMemory

FILES = {
    "pkg/__init__.py": "from pkg.text import slugify\n",
    "pkg/text.py": '''
        import re

        from pkg import util


        def slugify(text, sep="-"):
            """Lower-case words joined by a separator."""
            words = split_words(text)
            return sep.join(util.lower_all(words))


        def split_words(text):
            return re.findall(r"[A-Za-z0-9]+", text)


        class Slugger:
            def __init__(self, sep):
                self.sep = sep

            def run(self, text):
                return self.clean(slugify(text, self.sep))

            def clean(self, s):
                return s.strip(self.sep)
        ''',
    "pkg/util.py": """
        def lower_all(words):
            return [w.lower() for w in words]
        """,
    "tests/test_text.py": """
        from pkg.text import Slugger, slugify


        def test_slugify():
            assert slugify("Hello World") == "hello-world"


        class TestSlugger:
            def test_run(self):
                assert Slugger("_").run("A b") == "a_b"
        """,
    "broken.py": "def oops(:\n",
}


@pytest.fixture()
def repo(tmp_path):
    for rel, text in FILES.items():
        p = tmp_path / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(textwrap.dedent(text).lstrip("\n"))
    return RepoGraph(tmp_path)


def edges(repo, kind):
    return {(u, v) for u, v, d in repo.graph.edges(data=True) if d["kind"] == kind}


def test_nodes_and_edges_of_every_kind(repo):
    g = repo.graph
    assert g.nodes["pkg/text.py::slugify"]["kind"] == "function"
    assert g.nodes["pkg/text.py::Slugger"]["kind"] == "class"
    assert g.nodes["tests/test_text.py::test_slugify"]["kind"] == "test"
    assert g.nodes["tests/test_text.py::TestSlugger.test_run"]["kind"] == "test"
    assert len(repo.parse_errors) == 1 and repo.parse_errors[0].startswith("broken.py: ")  # reported, not fatal
    assert ("pkg/text.py::Slugger", "pkg/text.py::Slugger.run") in edges(repo, "contains")
    assert {("pkg/text.py", "pkg/util.py"), ("tests/test_text.py", "pkg/text.py")} <= edges(repo, "imports")
    calls = edges(repo, "calls")
    assert ("pkg/text.py::slugify", "pkg/text.py::split_words") in calls  # same module
    assert ("pkg/text.py::slugify", "pkg/util.py::lower_all") in calls  # module.name through an import
    assert ("pkg/text.py::Slugger.run", "pkg/text.py::Slugger.clean") in calls  # self.method
    assert ("tests/test_text.py::test_slugify", "pkg/text.py::slugify") in edges(repo, "tests")
    assert repo.summary()["nodes/test"] == 2


def test_anchors_by_identifier_text_and_traceback(repo):
    s = GraphSearch(repo)
    assert s.by_identifier("split_words")[0] == ("pkg/text.py::split_words", 1.0)
    assert s.by_identifier("Slugger.clean")[0][0] == "pkg/text.py::Slugger.clean"
    assert s.by_text("lower case words joined by a separator")[0][0] == "pkg/text.py::slugify"
    tb = (
        f'Traceback (most recent call last):\n  File "{repo.root}/tests/test_text.py", line 5, in test_slugify\n'
        f'  File "{repo.root}/pkg/text.py", line 9, in slugify\n  File "/usr/lib/python3/re.py", line 1, in findall\n'
    )
    hits = [n for n, _ in s.by_traceback(tb)]
    assert hits == ["pkg/text.py::slugify", "tests/test_text.py::test_slugify"]  # innermost repository frame first
    assert [n for n, _ in s.by_traceback("pkg/util.py:2: AssertionError")] == ["pkg/util.py::lower_all"]


def test_expansion_scores_decay_with_hops(repo):
    s = GraphSearch(repo)
    one = dict(s.expand(["pkg/text.py::slugify"], hops=1))
    two = dict(s.expand(["pkg/text.py::slugify"], hops=2))
    assert one["pkg/text.py::split_words"] == pytest.approx(0.8)
    assert "pkg/util.py" not in one and two["pkg/util.py"] == pytest.approx(0.8 * 0.6)  # lower_all <- contains
    assert "pkg/text.py::slugify" not in one


def test_memory_budget_ops_and_linearisation(repo):
    s = GraphSearch(repo)
    mem = WorkingMemory(repo, Budget(nodes=2, chars=400))
    cands = [n for n, _ in mem.candidates(s, ["pkg/text.py::slugify"])]
    assert cands[0] == "pkg/text.py::slugify" and "pkg/text.py::split_words" in cands
    res = mem.apply_ops(
        [
            {"op": "add", "node": "pkg/text.py::slugify"},
            {"op": "add", "node": "pkg/text.py::slugify"},
            {"op": "add", "node": "pkg/util.py::lower_all"},
            {"op": "add", "node": "pkg/text.py::Slugger"},
            {"op": "jump", "node": "x"},
            {"op": "remove", "node": "nowhere"},
        ]
    )
    assert [r.applied for r in res] == [True, False, True, False, False, False]
    assert res[1].reason == "already in memory" and "node budget 2" in res[3].reason and "unknown op" in res[4].reason
    assert mem.used()["nodes"] == 2 and mem.used()["chars"] <= 400
    text = mem.linearize()
    assert "### function pkg/text.py::slugify (pkg/text.py:6-9)" in text
    assert "    9 |     return sep.join(util.lower_all(words))" in text
    assert "calls-> pkg/util.py::lower_all [in memory]" in text
    small = WorkingMemory(repo, Budget(nodes=5, chars=50))
    assert "exceed" in small.apply_ops([{"op": "add", "node": "pkg/text.py::Slugger"}])[0].reason
