"""Run candidate patches against the packages' own tests in parallel PlannerEnv slots, results cached.

Training runs the task's FAIL_TO_PASS tests (a Repair with apply); evaluation Submits, which runs
FAIL_TO_PASS + PASS_TO_PASS, but only for an edit whose FAIL_TO_PASS tests pass on their own: an edit
that leaves one of them failing cannot resolve the task, so its whole-suite run (2-8 s a package here,
against ~1 s for the failing tests' modules) would only confirm a 0. The corpus validated every task's
FAIL_TO_PASS with the same isolated runs, so the verdict is the Submit's. Every run starts from a clean checkout (PlannerEnv's rule), patches pass
the env's screen, and outcomes are cached by (task, patched files, tests) in a file shared by every
run over the same corpus, so a repeated patch costs one run ever.
"""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from graph_planner.env import EnvLimits, PlannerEnv, ResultCache
from graph_planner.runtime import LocalRuntime
from graph_planner.tasks import RepairTask


class _TestsUnlocked:
    """A runtime whose test runs release the sandbox's lock: only the Python work of a judgement is serial."""

    def __init__(self, runtime: LocalRuntime, lock: threading.RLock):
        self.runtime, self.lock = runtime, lock

    def __getattr__(self, name):
        return getattr(self.runtime, name)

    def run_tests(self, *args, **kwargs):
        """The runtime's test run, outside the lock (the slow part, a subprocess: runs in parallel)."""
        self.lock.release()
        try:
            return self.runtime.run_tests(*args, **kwargs)
        finally:
            self.lock.acquire()


class Sandbox:
    """A pool of PlannerEnv slots that judges edits.

    CPython 3.11's AST construction keeps its recursion counter in shared state, so two threads parsing
    at once fail with "SystemError: AST constructor recursion depth mismatch" (seen in this pool: code
    graphs, the patch screen). Judgements therefore hold one lock for their Python work and release it
    only while their tests run in the sandbox's subprocess.
    """

    def __init__(self, workers: int, cache_path: str | Path | None, test_timeout_s: float,
                 telemetry_dir: str | Path | None = None):
        self.workers = workers
        self.cache = ResultCache(cache_path)
        self.limits = EnvLimits(steps=4, test_runs=2, test_timeout_s=test_timeout_s)
        self.telemetry_dir = Path(telemetry_dir) if telemetry_dir else None
        self._local = threading.local()
        self._envs: list[PlannerEnv] = []
        self._lock = threading.Lock()
        self._work = threading.RLock()
        self.stats = {"test_runs": 0, "full_runs": 0, "cache_hits": 0, "refused": 0, "seconds": 0.0}

    def _env(self) -> PlannerEnv:
        env = getattr(self._local, "env", None)
        if env is None:
            with self._lock:
                slot = len(self._envs)
                tele = self.telemetry_dir / f"slot-{slot}.jsonl" if self.telemetry_dir else None
                env = PlannerEnv(_TestsUnlocked(LocalRuntime(), self._work), self.limits, telemetry=tele,
                                 cache=self.cache)
                self._envs.append(env)
            self._local.env = env
        return env

    def judge(self, task: RepairTask, edit: dict, mode: str) -> dict:
        """One edit on one task ('train' or 'eval' mode).

        Returns {'resolved', 'refused', 'cached' (no test ran), 'runs' (test runs made), 'full' (whole-suite
        runs made)}."""
        env = self._env()
        t0 = time.perf_counter()
        with self._work:
            result = self._judge(env, task, edit, mode)
        with self._lock:
            self.stats["test_runs"] += result["runs"]
            self.stats["full_runs"] += result["full"]
            self.stats["cache_hits"] += int(result["cached"])
            self.stats["refused"] += int(result["refused"])
            self.stats["seconds"] += time.perf_counter() - t0
        return result

    @staticmethod
    def _judge(env: PlannerEnv, task: RepairTask, edit: dict, mode: str) -> dict:
        env.reset(task)
        obs, *_ = env.step({"type": "repair", "apply": True, "edits": [edit]})
        if not obs.get("applied"):
            return {"resolved": False, "cached": False, "refused": True, "runs": 0, "full": 0,
                    "error": obs.get("error", "")[:200]}
        tests = obs.get("tests") or {}
        f2p_ok = tests.get("status") == "ok" and not tests.get("failed")
        runs = int(not tests.get("cached"))
        if mode == "train" or not f2p_ok:
            return {"resolved": f2p_ok, "cached": runs == 0, "refused": False, "runs": runs, "full": 0}
        obs, *_ = env.step({"type": "submit"})
        full = int(not obs["tests"].get("cached"))
        return {"resolved": bool(obs.get("resolved")), "cached": runs + full == 0, "refused": False,
                "runs": runs + full, "full": full}

    def judge_many(self, jobs: list[tuple[RepairTask, dict]], mode: str) -> list[dict]:
        """Judge (task, edit) pairs in parallel slots; identical pairs are judged once."""
        keys = [(t.instance_id, e["file"], e["old"], e["new"]) for t, e in jobs]
        unique = {}
        for k, job in zip(keys, jobs):
            unique.setdefault(k, job)
        with ThreadPoolExecutor(max_workers=self.workers) as pool:
            results = dict(zip(unique, pool.map(lambda j: self.judge(j[0], j[1], mode), unique.values())))
        return [results[k] for k in keys]

    def close(self) -> None:
        """Remove the slots' working copies."""
        for env in self._envs:
            env.runtime.runtime.close()
        self._envs.clear()
        self._local = threading.local()
