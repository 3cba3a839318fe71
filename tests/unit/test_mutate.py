"""Procedural bugs: each mutant is one small edit inside one function whose fix is a one-hunk diff."""

from __future__ import annotations

import ast
import subprocess
import textwrap

from graph_planner.corpus.mutate import TOKEN_LEVEL, mutants

SOURCE = textwrap.dedent('''
    import re


    def clamp(x, lo=0, hi=10):
        """Keep x within [lo, hi]."""  # comments and formatting elsewhere stay byte for byte
        if x < lo:
            return lo
        if x > hi and hi is not None:
            return hi
        return x


    class Words:
        def first(self, text, n=2):
            words = re.split(r"\\s+", text)
            total = len(words) + 1
            return words[: n + 1], total * 2, list(range(3))
    ''').lstrip()


def test_every_operator_kind_appears_and_each_mutant_is_one_local_edit():
    ms = mutants("pkg/sample.py", SOURCE)
    kinds = {m.kind for m in ms}
    assert kinds == {
        "comparison",
        "boolop",
        "constant",
        "binop",
        "bound",
        "negate_if",
        "remove_if",
        "remove_stmt",
        "swap_args",
        "default",
    }
    descriptions = {(m.kind, m.description) for m in ms}
    assert ("comparison", "x < lo -> x <= lo") in descriptions
    assert ("boolop", "x > hi and hi is not None -> x > hi or hi is not None") in descriptions
    assert ("bound", "range bound 3 -> 4") in descriptions and ("default", "default 10 -> 11") in descriptions
    assert ("swap_args", 'swap arguments r"\\s+", text') in descriptions
    assert len({m.source for m in ms}) == len(ms)  # no duplicates
    for m in ms:
        ast.parse(m.source)
        patch = m.patch(SOURCE)
        assert patch.count("\n@@ ") + patch.startswith("@@ ") == 1, m  # one hunk
        changed = [ln for ln in patch.splitlines() if ln[:1] in "+-" and not ln.startswith(("+++", "---"))]
        assert 1 <= len(changed) <= 4, (m.description, changed)
        fn = next(n for n in ast.walk(ast.parse(SOURCE)) if getattr(n, "name", None) == m.function.split(".")[-1])
        assert fn.lineno <= m.line <= fn.end_lineno  # inside the function it names


def test_token_level_filter_and_function_filter():
    ms = mutants("pkg/sample.py", SOURCE, functions={"clamp"}, kinds=TOKEN_LEVEL)
    assert ms and {m.function for m in ms} == {"clamp"} and {m.kind for m in ms} <= set(TOKEN_LEVEL)


def test_the_fix_patch_applies_with_git(tmp_path):
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    (tmp_path / "pkg").mkdir()
    m = mutants("pkg/sample.py", SOURCE, kinds=("comparison",))[0]
    (tmp_path / "pkg" / "sample.py").write_text(m.source)
    (tmp_path / "fix.diff").write_text(m.patch(SOURCE))
    subprocess.run(["git", "apply", "fix.diff"], cwd=tmp_path, check=True)
    assert (tmp_path / "pkg" / "sample.py").read_text() == SOURCE


def test_no_mutant_touches_a_signature_or_decorator_whose_fix_the_patch_check_would_refuse():
    """Annotations (`str | None`), decorator arguments and computed defaults are outside the body a
    patch may change: a mutant there would be a task whose own gold fix can never be submitted."""
    from graph_planner.patch_check import screen

    source = textwrap.dedent("""
        import functools


        @functools.lru_cache(maxsize=2 * 64)
        def pad(text: str | None, width: int = 1 + 3) -> str | bytes:
            return (text or "") + " " * (width - 1)
        """).lstrip()
    found = mutants("m.py", source)
    assert found and {m.line for m in found} == {6}
    assert all(screen(source, m.source) == [] for m in found)


def test_a_package_built_by_other_mutation_operators_is_rebuilt(monkeypatch):
    """The corpus cache key holds a hash of the operators' code: changing them rebuilds every package,
    even when nobody bumps the validity version; comments and formatting do not count."""
    import ast
    from pathlib import Path

    from graph_planner.corpus import build
    from graph_planner.corpus.spec import CorpusConfig, PackageSpec

    spec, cfg = PackageSpec(name="parse", version="1.22.4", sha256="0" * 64), CorpusConfig(packages=[])
    before = build.settings_hash(spec, cfg)
    source = Path(build.mutants.__code__.co_filename).read_text()
    assert build.MUTATOR == build._mutator_version()
    assert ast.dump(ast.parse(source + "\n# a comment\n")) == ast.dump(ast.parse(source))
    monkeypatch.setattr(build, "MUTATOR", "another")
    assert build.settings_hash(spec, cfg) != before


def test_a_package_that_cannot_be_fetched_fails_the_build_before_any_work_naming_it(monkeypatch, tmp_path):
    import pytest

    from graph_planner.corpus import build
    from graph_planner.corpus.fetch import FetchError
    from graph_planner.corpus.spec import CorpusConfig

    def fetch(name, version, digest, cache):
        if name == "broken":
            raise FetchError("pip download broken==1.0 failed:\nERROR: Failed to build 'broken'")
        return tmp_path / f"{name}.tar.gz"

    monkeypatch.setattr(build, "fetch_sdist", fetch)
    monkeypatch.setattr(build, "build_package", lambda *a, **k: pytest.fail("a package was built"))
    pkgs = [{"name": n, "version": "1.0", "sha256": "ab" * 32, "split": "train"} for n in ("fine", "broken")]
    with pytest.raises(
        FetchError, match=r"broken==1.0: pip download broken==1.0 failed:\n    ERROR: Failed to build .broken."
    ) as err:
        build.build_corpus(CorpusConfig(packages=pkgs), tmp_path / "out", tmp_path)
    assert "fine" not in str(err.value) and not (tmp_path / "out").exists()


def test_building_with_the_call_jail_is_a_different_build_and_without_it_keeps_the_cache():
    """`jail: true` decides which gold fixes pass (the jailed ones go down the jailed path), so it is part of
    a package's and a release pair's cache key; a build without it keys as before, so corpora built earlier
    are not rebuilt."""
    from graph_planner.corpus import build, history_tasks
    from graph_planner.corpus.history_spec import HistoryConfig, HistoryPair, Release
    from graph_planner.corpus.spec import CorpusConfig, PackageSpec

    spec, cfg = PackageSpec(name="parse", version="1.22.4", sha256="0" * 64), CorpusConfig(packages=[])
    assert build.settings_hash(spec, cfg.model_copy(update={"jail": True})) != build.settings_hash(spec, cfg)
    assert build.settings_hash(spec, cfg) == build.settings_hash(spec, CorpusConfig(packages=[], jail=False))
    pair = HistoryPair(
        name="parse", old=Release(version="1.22.3", sha256="0" * 64), new=Release(version="1.22.4", sha256="1" * 64)
    )
    plain = HistoryConfig(pairs=[pair])
    assert history_tasks.settings_hash(pair, plain.model_copy(update={"jail": True})) != history_tasks.settings_hash(
        pair, plain
    )
