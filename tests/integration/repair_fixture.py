"""Tiny local packages with their own pytest suites, built into corpora (no network) for env tests: minilib
(held-out tasks), and minitext beside it where a corpus needs a training split (the RL tests)."""

from __future__ import annotations

import re
import shutil
import textwrap
from pathlib import Path

import pytest
from filelock import FileLock

from graph_planner.corpus.build import build_corpus
from graph_planner.corpus.spec import CorpusConfig, PackageSpec
from graph_planner.env import EnvLimits, PlannerEnv
from graph_planner.tasks import RepairTask, load_tasks

from .callback_package import PACKAGE as HOOKS
from .gadget_package import PACKAGE as GADGETS
from .state_package import PACKAGE as STATEFUL
from .writes_package import PACKAGE as WRITES

# The function both the corpus fixture and the validation tests mutate (indented as FILES' texts are).
CLAMP = """
        def clamp(x, lo, hi):
            if x < lo:
                return lo
            if x > hi:
                return hi
            return x
"""

FILES = {
    "minilib/__init__.py": "from minilib.core import clamp, mean, window, scale\n",
    "minilib/core.py": CLAMP
    + """

        def mean(values):
            total = 0
            for v in values:
                total = total + v
            return total / len(values)


        def window(seq, size=2):
            return [seq[i:i + size] for i in range(len(seq) - size + 1)]


        def scale(values, factor):
            return [clamp(v * factor, 0, 100) for v in values]
        """,
    "tests/test_core.py": """
        from minilib import clamp, mean, scale, window


        def test_clamp_inside():
            assert clamp(5, 0, 10) == 5


        def test_clamp_edges():
            assert clamp(-1, 0, 10) == 0 and clamp(11, 0, 10) == 10


        def test_mean():
            assert mean([1, 2, 3, 6]) == 3


        def test_window():
            assert window([1, 2, 3]) == [[1, 2], [2, 3]]
            assert window([1, 2, 3], 3) == [[1, 2, 3]]


        def test_scale():
            assert scale([1, 50, 60], 2) == [2, 100, 100]
        """,
}


# A second package: the training split of the RL tests' corpus (tests/integration/test_repair_rl.py), minilib
# its unseen package. Eight small functions, each pinned by its test, so most token-level mutants fail one.
MINITEXT = {
    "minitext/__init__.py": (
        "from minitext.core import chunk, count_vowels, initials, is_palindrome, pad_left, repeat_join, slug, truncate\n"
    ),
    "minitext/core.py": """
        def slug(text, sep="-"):
            words = [w for w in text.lower().split() if w]
            return sep.join(words)


        def truncate(text, width, tail="..."):
            if len(text) <= width:
                return text
            return text[: max(0, width - len(tail))] + tail


        def count_vowels(text):
            n = 0
            for ch in text.lower():
                if ch in "aeiou":
                    n = n + 1
            return n


        def pad_left(text, width, fill=" "):
            if len(text) >= width:
                return text
            return fill * (width - len(text)) + text


        def initials(name):
            return "".join(part[0].upper() for part in name.split() if part)


        def is_palindrome(text):
            letters = [c for c in text.lower() if c.isalnum()]
            return len(letters) > 0 and letters == letters[::-1]


        def chunk(text, size):
            if size < 1:
                raise ValueError("size must be positive")
            return [text[i:i + size] for i in range(0, len(text), size)]


        def repeat_join(word, times, sep=" "):
            return sep.join([word] * times)
        """,
    "tests/test_text.py": """
        import pytest

        from minitext import chunk, count_vowels, initials, is_palindrome, pad_left, repeat_join, slug, truncate


        def test_slug():
            assert slug("Hello  Big World") == "hello-big-world"
            assert slug("A b", sep="_") == "a_b"


        def test_truncate():
            assert truncate("short", 5) == "short"
            assert truncate("longer text", 8) == "longe..."
            assert truncate("abcdef", 2, tail="..") == ".."


        def test_count_vowels():
            assert count_vowels("Education") == 5
            assert count_vowels("xyz") == 0


        def test_pad_left():
            assert pad_left("7", 3, "0") == "007"
            assert pad_left("1234", 3) == "1234"
            assert pad_left("ab", 2) == "ab"


        def test_initials():
            assert initials("ada  lovelace") == "AL"


        def test_is_palindrome():
            assert is_palindrome("Never odd or even")
            assert not is_palindrome("abca")
            assert not is_palindrome("")


        def test_chunk():
            assert chunk("abcdefg", 3) == ["abc", "def", "g"]
            assert chunk("ab", 1) == ["a", "b"]
            with pytest.raises(ValueError):
                chunk("ab", 0)


        def test_repeat_join():
            assert repeat_join("ab", 3) == "ab ab ab"
            assert repeat_join("x", 2, sep="-") == "x-x"
            assert repeat_join("x", 0) == ""
        """,
}

PACKAGES = {
    "minilib": FILES,
    "minitext": MINITEXT,
    "gadgets": GADGETS,
    "stateful": STATEFUL,
    "writes": WRITES,
    "hooks": HOOKS,
}


def write_files(root: Path, files: dict[str, str]) -> Path:
    """Write {relative path: indented text} under `root`; returns `root`."""
    for rel, text in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(textwrap.dedent(text).lstrip("\n"))
    return root


def write_package(root: Path, name: str = "minilib") -> Path:
    """The package's source folder under `root`."""
    return write_files(root / f"{name}-src", PACKAGES[name])


def _build(root: Path, splits: dict[str, str], kinds: list[str] | None, **budget) -> Path:
    specs = [
        PackageSpec(name=name, version="0.1", source=str(write_package(root, name)), split=split)
        for name, split in splits.items()
    ]
    cfg = CorpusConfig(packages=specs, timeout_s=30, **budget, **({"kinds": kinds} if kinds else {}))
    build_corpus(cfg, root / "corpus", log=lambda _: None)
    return root / "corpus"


def _session_dir(path: Path) -> Path | None:
    """pytest's folder for this test session (`.../pytest-<N>`, shared by its xdist workers), if `path` is in one."""
    return next((p for p in [path, *path.parents] if re.fullmatch(r"pytest-\d+", p.name)), None)


def build_packages(root: Path, splits: dict[str, str], kinds: list[str] | None = None, **budget) -> Path:
    """A corpus of the named packages' tasks ({name: split}) in `root`/corpus; returns the corpus folder.

    Built once per test session, packages and kinds, then copied: every caller gets a fresh folder of its
    own (its result cache, contexts), the same tasks as a build of its own (two builds give identical tasks,
    tools/same_corpus.py)."""
    session = _session_dir(Path(root).resolve())
    if session is None:
        return _build(root, splits, kinds, **budget)
    key = "+".join(f"{n}.{s}" for n, s in sorted(splits.items())) + "-" + "-".join(sorted(kinds or ["all"]))
    key += "-jail" if budget.get("jail") else ""
    shared = session / "minilib-corpora" / key
    shared.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(shared) + ".lock"):
        if not (shared / "built").is_file():
            shutil.rmtree(shared, ignore_errors=True)
            _build(shared, splits, kinds, **budget)
            (shared / "built").touch()
    for name in splits:  # the packages' sources beside the corpus, as a build of its own leaves them
        write_package(root, name)
    shutil.copytree(shared / "corpus", root / "corpus")
    return root / "corpus"


def build_minilib(root: Path, kinds: list[str] | None = None, jail: bool = False) -> Path:
    """A corpus of minilib tasks (held-out split) in `root`/corpus (~10 CPU-s, once per session and kinds;
    six test files use it); returns the corpus folder. `jail`: each task qualified for the call jail at the
    build (free-form replies are model text, judged only there)."""
    return build_packages(root, {"minilib": "heldout"}, kinds, per_function=3, max_tried=14, max_kept=14, jail=jail)


def gadget_task(root: Path) -> RepairTask:
    """The gadget package's `spread` task (a binop mutant), from a corpus built once per session."""
    corpus = build_packages(root, {"gadgets": "heldout"}, ["binop"], max_tried=6, max_kept=6)
    return next(t for t in load_tasks(corpus) if t.meta["function"] == "spread")


def gadget_fixtures():
    """A verdict attack module's fixtures: `task` (gadget_task) and `envs` ({check on: env, check off: env},
    the runtime guard on in both), module-scoped; assign them as `task, envs = gadget_fixtures()`."""

    @pytest.fixture(scope="module", name="task")
    def task_(tmp_path_factory):
        return gadget_task(tmp_path_factory.mktemp("gadgets"))

    @pytest.fixture(scope="module", name="envs")
    def envs_():
        # Targeting off in both: several attacks change a function beside the buggy one, which targeting alone
        # already scores 0 (test_verdict_deferred.py); these show the layers behind it hold too. Origin "menu":
        # the static path's layers are under test, so every body is judged as planact's own edit would be (the
        # derived origin, "model", would leave it unrun on this unjailed task: test_verdict_jail.py).
        made = {
            screen: PlannerEnv(
                limits=EnvLimits(test_cpu_s=10, screen_patches=screen, target_patches=False), origin="menu"
            )
            for screen in (True, False)
        }
        yield made
        for e in made.values():
            e.runtime.close()

    return task_, envs_


def submit_body(env: PlannerEnv, task, body: str) -> tuple[dict, float]:
    """The buggy `spread` with `body` run first, submitted: (the last observation, reward)."""
    env.reset(task)
    path = task.meta["file"]
    text = env._read_base(path)
    start = text.index("def spread")
    buggy = text[start:].split("\n", 1)[1]  # the mutant's own body, bug in place
    lines = "".join(f"    {line}\n" for line in body.splitlines())
    new = text[:start] + "def spread(values):\n" + lines + buggy
    obs, _, _, _ = env.step({"type": "repair", "apply": False, "edits": [{"file": path, "old": text, "new": new}]})
    if not obs["applied"]:
        return obs, 0.0
    obs, reward, done, _ = env.step({"type": "submit"})
    assert done
    return obs, reward


def env_entries(envs: dict) -> list[dict]:
    """Every cached result of both environments."""
    return [r for e in envs.values() for r in e.cache.entries.values()]
