"""Repair episode throughput: K sandbox slots in parallel vs one slot, on the same tasks, in one run.

Each episode is reset -> Repair with the gold patch -> Submit (FAIL_TO_PASS + PASS_TO_PASS in the
sandbox), so its cost is the environment's own (git reset, sandbox start, pytest), not an agent's luck.
Prints tasks/s for 1 slot and for K slots, and the scaling efficiency (K-slot rate / (K x 1-slot rate));
the target is >= 0.8 on K otherwise idle CPUs. The result cache is off (every episode runs its tests).

Then what a verdict's defences cost per task, on one slot, the same gold patches: one Submit run without
the runtime guard, the same run under the guard (watching the functions the gold patch changed; target
<= 1.15x), and the confirming second run a pass needs (canaries, another build), in CPU seconds of the
sandboxed tree (load-proof) and wall seconds, runs alternated. On the tasks that qualify for the call jail
(the path model-written text takes), the same for the jailed run and its confirming run (a new sandbox and
zygote), against those tasks' plain runs.

    python benchmarks/repair_throughput.py                        # the shipped corpus in runs/corpus (built if missing)
    python benchmarks/repair_throughput.py --tasks DIR --slots 4 --n 40
    python benchmarks/repair_throughput.py --tiny                 # a few tasks of a built-in package (the test runs
    this)
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import textwrap
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from graph_planner.corpus.build import build_corpus  # noqa: E402
from graph_planner.corpus.spec import CorpusConfig, PackageSpec, load_corpus_config  # noqa: E402
from graph_planner.corpus.testrun import Guard, load_proof  # noqa: E402
from graph_planner.env import EnvLimits, PlannerEnv  # noqa: E402
from graph_planner.evaluate import shard  # noqa: E402
from graph_planner.judge import gold_texts, jail_target, watched  # noqa: E402
from graph_planner.result_cache import ResultCache  # noqa: E402
from graph_planner.runtime import LocalRuntime  # noqa: E402
from graph_planner.tasks import load_tasks  # noqa: E402

TINY = {
    "tinypkg/__init__.py": "def add(a, b):\n    return a + b\n\n\ndef first(xs, n=1):\n    return xs[:n]\n",
    "tests/test_tiny.py": textwrap.dedent("""
        from tinypkg import add, first


        def test_add():
            assert add(2, 3) == 5


        def test_first():
            assert first([1, 2, 3]) == [1] and first([1, 2, 3], 2) == [1, 2]
        """),
}


class _NoCache(ResultCache):
    """Every verdict judged afresh (no outcome reused); the judge's clean records and gold state references are
    kept as a real cache keeps them (the judge's set-up per task, not the episode's work)."""

    def get(self, key):
        return None

    def put(self, key, result):
        pass


def episodes(tasks, slot_count: int) -> float:
    """Seconds to run gold-patch episodes of all `tasks` on `slot_count` slots."""

    def run(part):
        env = PlannerEnv(limits=EnvLimits(test_cpu_s=120), cache=_NoCache())
        try:
            for task in part:
                env.reset(task)
                env.step({"type": "repair", "apply": False, "patch": task.gold_patch})
                obs, reward, _, _ = env.step({"type": "submit"})
                assert reward == 1.0, (task.instance_id, obs)
        finally:
            env.runtime.close()

    t0 = time.perf_counter()
    with ThreadPoolExecutor(slot_count) as pool:
        list(pool.map(run, shard(tasks, slot_count)))
    return time.perf_counter() - t0


def verdict_cost(tasks, repeats: int = 2) -> dict[str, tuple[float, float]]:
    """Mean (CPU s, wall s) per Submit run of the gold patches: 'plain' (no guard), 'guarded', 'confirming';
    on the tasks with the call jail also 'jailed', 'jailed confirming' and their own 'plain, jailed tasks'."""
    runtime = LocalRuntime()
    seen: dict[str, list[tuple[float, float]]] = {"plain": [], "guarded": [], "confirming": []}
    try:
        for task in tasks:
            texts = gold_texts(task)
            guard = watched(task, texts)[0]
            suite = load_proof(task.suite, task.suite.timeout_s)
            arms = [("plain", Guard(), False), ("guarded", guard, False), ("confirming", guard, True)]
            if task.jail:
                cell = Guard(jail=jail_target(task, texts))
                arms += [("plain, jailed tasks", Guard(), False), ("jailed", cell, False)]
                arms += [("jailed confirming", cell, True)]
            for _ in range(repeats):
                for name, g, confirm in arms:
                    work = runtime.reset(task)
                    for path, text in texts.items():
                        (work / path).write_text(text)
                    run = runtime.run_tests(task.submit_tests(), suite, guard=g, confirm=confirm)
                    assert run.status == "ok" and not run.tampered, (task.instance_id, name, run.tampered, run.tail)
                    seen.setdefault(name, []).append((run.cpu_s or 0.0, run.seconds))
    finally:
        runtime.close()
    return {k: (sum(c for c, _ in v) / len(v), sum(w for _, w in v) / len(v)) for k, v in seen.items()}


def tiny_corpus(root: Path, jail: bool = False) -> Path:
    """A built-in two-function package built into a corpus under `root` (`jail`: its tasks qualified for the call
    jail, as free-form replies need)."""
    for rel, text in TINY.items():
        (root / "src" / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / "src" / rel).write_text(text)
    spec = PackageSpec(name="tinypkg", version="0", source=str(root / "src"))
    cfg = CorpusConfig(packages=[spec], max_tried=8, max_kept=8, jail=jail)
    build_corpus(cfg, root / "corpus", log=lambda _: None)
    return root / "corpus"


def main() -> None:
    """Measure and print."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tasks", default="runs/corpus", help="corpus folder (built from --config when missing)")
    ap.add_argument("--config", default="configs/repair-corpus.yaml")
    ap.add_argument("--split", default="heldout")
    ap.add_argument("--n", type=int, default=24, help="tasks per measurement")
    ap.add_argument("--slots", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--tiny", action="store_true", help="a built-in package and a few tasks (smoke mode)")
    args = ap.parse_args()
    if args.tiny:
        # qualified for the call jail, so the jailed arm below runs too
        folder, split, n = tiny_corpus(Path(tempfile.mkdtemp(prefix="repair-bench-")), jail=True), None, 4
    else:
        folder, split, n = Path(args.tasks), args.split, args.n
        if not (folder / "train.jsonl").is_file():
            build_corpus(load_corpus_config(args.config), folder)
    tasks = load_tasks(folder, split=split)
    tasks = (tasks * (n // max(len(tasks), 1) + 1))[:n]
    k = max(1, args.slots)
    episodes(tasks[:k], k)  # warm: imports, git objects, page cache
    one = len(tasks) / episodes(tasks, 1)
    many = len(tasks) / episodes(tasks, k)
    print(f"tasks: {len(tasks)} gold-patch episodes of {folder}")
    print(f"1 slot:  {one:.3f} tasks/s")
    print(f"{k} slots: {many:.3f} tasks/s")
    print(f"speed-up {many / one:.2f}x on {k} slots; scaling efficiency {many / (k * one):.2f} (target >= 0.80)")
    cost = verdict_cost(list({t.instance_id: t for t in tasks}.values()), repeats=1 if args.tiny else 2)
    (pc, pw), (gc, gw), (cc, cw) = cost["plain"], cost["guarded"], cost["confirming"]
    print(f"per Submit run (CPU-s / s): plain {pc:.3f} / {pw:.3f}; guarded {gc:.3f} / {gw:.3f}; ", end="")
    print(f"confirming {cc:.3f} / {cw:.3f}")
    print(f"guard: {gc / pc:.2f}x CPU, {gw / pw:.2f}x wall (target <= 1.15x)")
    print(f"a pass judged twice: {(gc + cc) / pc:.2f}x CPU, {(gw + cw) / pw:.2f}x wall of one unguarded run")
    if "jailed" not in cost:
        print("no task here has the call jail (qualify them: python -m graph_planner.jail_qualify CORPUS)")
        return
    jailed = sum(1 for t in {t.instance_id: t for t in tasks}.values() if t.jail)
    (qc, qw), (jc, jw), (kc, kw) = cost["plain, jailed tasks"], cost["jailed"], cost["jailed confirming"]
    print(f"jailed tasks ({jailed}), per Submit run (CPU-s / s): plain {qc:.3f} / {qw:.3f}; jailed {jc:.3f} / ", end="")
    print(f"{jw:.3f}; confirming {kc:.3f} / {kw:.3f}")
    print(
        f"a pass judged twice in the call jail: {(jc + kc) / qc:.2f}x CPU, {(jw + kw) / qw:.2f}x wall of one plain run"
    )


if __name__ == "__main__":
    main()
