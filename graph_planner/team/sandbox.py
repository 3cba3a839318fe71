"""Run candidate patches against the packages' own tests in parallel slots, results cached.

Training runs the task's FAIL_TO_PASS tests; evaluation Submits, which runs FAIL_TO_PASS +
PASS_TO_PASS, but only for an edit whose FAIL_TO_PASS tests pass on their own: an edit that leaves one
of them failing cannot resolve the task, so its whole-suite run (2-8 s a package here, against ~1 s for
the failing tests' modules) would only confirm a 0. The corpus validated every task's FAIL_TO_PASS with
the same isolated runs, so the verdict is the Submit's.

A judgement holds PlannerEnv's rules without building an episode: the edit must apply to an existing
non-test Python file at the base commit and pass the patch screen; every test run starts from a clean
checkout (graph_planner.judge.run_patch); outcomes are cached by (task, patched files, tests) in a file
shared by every run over the same corpus, so a repeated patch costs one run ever. No code graph is
built: a PlannerEnv episode parses the whole repository at reset (0.1-0.5 s a task, serial, see below),
which made a cached judgement cost ~0.7 s and a held-out evaluation minutes of graph building.

Every judgement names the edit's origin (graph_planner.provenance): "model" (the default: a free-form reply
or anything else planact did not enumerate) runs only on a task with the call jail; elsewhere it is
unjudged (reward 0, counted in `stats["unjudged"]`, nothing runs). "menu" is for edits planact enumerated
from the task's own source (the candidates the team's actor and the baselines choose among).
"""

from __future__ import annotations

import json
import threading
import time
from collections import Counter, OrderedDict
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path, PurePosixPath

from graph_planner.corpus.fetch import git
from graph_planner.graph.build import SKIP_DIRS
from graph_planner.judge import passed, run_patch
from graph_planner.patching import PatchError, apply_edits, screen
from graph_planner.provenance import MODEL, UNJUDGED, unjudged
from graph_planner.result_cache import ResultCache
from graph_planner.runtime import LocalRuntime
from graph_planner.tasks import RepairTask

TEXTS_KEPT = 512  # base-commit file texts kept in memory (every corpus task is its own commit)


class Sandbox:
    """A pool of working-copy slots that judges edits.

    CPython 3.11's AST construction keeps its recursion counter in shared state, so two threads parsing
    at once fail with "SystemError: AST constructor recursion depth mismatch" (seen in this pool: the
    patch screen). The screen therefore runs under one lock; test runs (subprocesses) run in parallel.
    """

    def __init__(
        self,
        workers: int,
        cache_path: str | Path | None,
        test_cpu_s: float,
        telemetry_dir: str | Path | None = None,
    ):
        self.workers = workers
        self.cache = ResultCache(cache_path)
        self.test_cpu_s = test_cpu_s
        self.telemetry_dir = Path(telemetry_dir) if telemetry_dir else None
        self._local = threading.local()
        self._runtimes: list[LocalRuntime] = []
        self._lock = threading.Lock()
        self._parse = threading.Lock()
        self._files: dict[str, set[str]] = {}
        self._texts: OrderedDict[tuple[str, str], str] = OrderedDict()
        self.stats = {"test_runs": 0, "full_runs": 0, "cache_hits": 0, "refused": 0, "tampering": 0, "unjudged": 0}
        self.stats["seconds"] = 0.0

    def _slot(self) -> tuple[LocalRuntime, Path | None]:
        rt = getattr(self._local, "runtime", None)
        if rt is None:
            with self._lock:
                slot = len(self._runtimes)
                rt = LocalRuntime()
                self._runtimes.append(rt)
            self._local.runtime = rt
            self._local.telemetry = self.telemetry_dir / f"slot-{slot}.jsonl" if self.telemetry_dir else None
        return rt, self._local.telemetry

    def _repo_files(self, task: RepairTask) -> set[str]:
        """Python files at the task's base commit (what a PlannerEnv's code graph would list)."""
        key = f"{task.repo_dir}@{task.base_commit}"
        if key not in self._files:
            names = git(task.repo_dir, "ls-tree", "-r", "--name-only", task.base_commit).splitlines()
            files = {n for n in names if n.endswith(".py") and not SKIP_DIRS.intersection(PurePosixPath(n).parts)}
            with self._lock:
                self._files[key] = files
        return self._files[key]

    def _base_text(self, task: RepairTask, path: str) -> str:
        key = (f"{task.repo_dir}@{task.base_commit}", path)
        with self._lock:
            if key in self._texts:
                self._texts.move_to_end(key)
                return self._texts[key]
        text = git(task.repo_dir, "show", f"{task.base_commit}:{path}", strip=False)
        with self._lock:
            self._texts[key] = text
            while len(self._texts) > TEXTS_KEPT:
                self._texts.popitem(last=False)
        return text

    def _patch(self, task: RepairTask, edit: dict) -> tuple[dict[str, str] | None, str]:
        """The patched files of an edit, or None and why it was refused (does not apply / screened)."""
        try:
            texts = apply_edits([edit], lambda p: self._base_text(task, p), self._repo_files(task))
        except (PatchError, RuntimeError) as e:
            return None, str(e)
        with self._parse:
            reasons = {p: r for p, t in texts.items() if (r := screen(self._base_text(task, p), t, not task.jail))}
        return (None, f"patch refused: {reasons}") if reasons else (texts, "")

    def judge(self, task: RepairTask, edit: dict, mode: str, origin: str = MODEL) -> dict:
        """One edit on one task ('train' or 'eval' mode) whose code came from `origin` (provenance.ORIGINS).

        Returns {'resolved', 'refused', 'cached' (no test ran), 'runs' (test runs made), 'full' (whole-suite
        runs made)}, and 'unjudged': True where the edit was not run (model text on a task without the jail)."""
        runtime, telemetry = self._slot()
        t0 = time.perf_counter()
        if unjudged(task, origin):  # model text on a task without the call jail: not screened, not run
            result = {"resolved": False, "cached": False, "refused": False, "unjudged": True, "runs": 0, "full": 0}
            result["error"] = UNJUDGED
        else:
            result = self._judge(runtime, task, edit, mode, origin)
        seconds = time.perf_counter() - t0
        with self._lock:
            self.stats["test_runs"] += result["runs"]
            self.stats["full_runs"] += result["full"]
            self.stats["cache_hits"] += int(result["cached"])
            self.stats["refused"] += int(result["refused"])
            self.stats["tampering"] += result.get("tampering", 0)
            self.stats["unjudged"] += int(result.get("unjudged", False))
            self.stats["seconds"] += seconds
        if telemetry is not None:
            telemetry.parent.mkdir(parents=True, exist_ok=True)
            with open(telemetry, "a") as fh:
                fh.write(
                    json.dumps(
                        {"instance_id": task.instance_id, "mode": mode, "origin": origin, "edit": edit, **result}
                        | {"t": round(seconds, 3)}
                    )
                    + "\n"
                )
        return result

    def _judge(self, runtime: LocalRuntime, task: RepairTask, edit: dict, mode: str, origin: str) -> dict:
        texts, error = self._patch(task, edit)
        if texts is None:
            return {"resolved": False, "cached": False, "refused": True, "runs": 0, "full": 0, "error": error[:200]}
        f2p = run_patch(
            runtime, self.cache, task, texts, task.fail_to_pass, "fail_to_pass", self.test_cpu_s, origin=origin
        )
        runs, tampering = int(not f2p.get("cached")), int("tampered" in f2p)
        if mode == "train" or not passed(f2p):
            return {
                "resolved": passed(f2p),
                "cached": runs == 0,
                "refused": False,
                "runs": runs,
                "full": 0,
                "tampering": tampering,
            }
        whole = run_patch(
            runtime, self.cache, task, texts, task.submit_tests(), "submit", self.test_cpu_s, origin=origin
        )
        full = int(not whole.get("cached"))
        return {
            "resolved": passed(whole),
            "cached": runs + full == 0,
            "refused": False,
            "runs": runs + full,
            "full": full,
            "tampering": tampering + int("tampered" in whole),
        }

    def judge_many(
        self,
        jobs: list[tuple[RepairTask, dict]],
        mode: str,
        origin: str = MODEL,
        on_judged: Callable[[dict], None] | None = None,
    ) -> list[dict]:
        """Judge (task, edit) pairs, all of one origin, in parallel slots; identical pairs are judged once
        (`on_judged` hears each job's verdict as it is reached, once per job, from the slot's thread)."""
        keys = [(t.instance_id, e["file"], e["old"], e["new"]) for t, e in jobs]
        unique, copies = {}, Counter(keys)
        for k, job in zip(keys, jobs):
            unique.setdefault(k, job)

        def one(key: tuple) -> dict:
            verdict = self.judge(*unique[key], mode, origin)
            for _ in range(copies[key] if on_judged is not None else 0):
                on_judged(verdict)
            return verdict

        with ThreadPoolExecutor(max_workers=self.workers) as pool:
            results = dict(zip(unique, pool.map(one, unique)))
        return [results[k] for k in keys]

    def close(self) -> None:
        """Remove the slots' working copies."""
        for rt in self._runtimes:
            rt.close()
        self._runtimes.clear()
        self._local = threading.local()
