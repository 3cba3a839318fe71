"""`planact-repair`: build a task corpus from pinned packages, and evaluate an agent on it.

  planact-repair corpus --config configs/repair-corpus.yaml --out corpus/
  planact-repair corpus --package NAME==VERSION [--sha256 HEX] --out DIR
  planact-repair corpus --history NAME OLD NEW --out DIR     one release pair of configs/repair-history.yaml
  planact-repair corpus --history --out DIR                  every pair of configs/repair-history.yaml
  planact-repair evaluate --agent rule --tasks corpus/ --split heldout [--budget-tests 6]
  planact-repair evaluate --agent gold-free --tasks corpus/ --split heldout    the free-form positive control
  planact-repair evaluate --agent free --engine hf --model planact:smollm2-135m-instruct --tasks corpus/
`evaluate` prints the solve rate, mean test runs and seconds per task as its last line. `free` and `gold-free`
judge only tasks with the call jail (a reply is model text): the others are counted as unjudged, not run.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from graph_planner.corpus.build import build_corpus
from graph_planner.corpus.fetch import DEFAULT_CACHE, FetchError
from graph_planner.corpus.spec import CORPUS_SPLITS, TASK_SPLITS, CorpusConfig, PackageSpec, load_corpus_config
from graph_planner.judge import DEFAULT_TEST_CPU_S
from graph_planner.provenance import HOW_TO_JAIL, UNJUDGED
from planact.progress import PhasePrinter

CORPUS_CONFIG, HISTORY_CONFIG = "configs/repair-corpus.yaml", "configs/repair-history.yaml"


def _history(args) -> int:
    """Release-history tasks: one pair (pins from the config, else fetched unpinned) or every pair."""
    from graph_planner.corpus.history import build_history
    from graph_planner.corpus.history_spec import HistoryPair, Release, load_history_config

    cfg = load_history_config(args.config or HISTORY_CONFIG)
    if len(args.history) == 3:
        name, old, new = args.history
        pair = cfg.pair(name, old, new) or HistoryPair(
            name=name, old=Release(version=old), new=Release(version=new), unpinned=True
        )
        cfg = cfg.model_copy(update={"pairs": [pair]})
    elif args.history:
        print("--history takes NAME OLD NEW, or nothing for every pair of the config", file=sys.stderr)
        return 2
    try:
        summary = build_history(cfg, args.out, Path(args.cache))
    except FetchError as e:
        print(e, file=sys.stderr)
        return 2
    for r in summary["pairs"]:
        print(
            f"{r['pair']}: {len(r['changes'])} changes, tried {r['tried']}, kept {r['kept']}, "
            f"skipped as API {r['skipped_api']}, dropped {r['dropped']}, build {r['build_s']} s, "
            f"sha256 old {r['sha256']['old']} new {r['sha256']['new']}"
            + (f"\n  UNUSABLE: {r['unusable']}" if r.get("unusable") else "")
        )
    print(f"{summary['tasks']} tasks ({summary['real']} real) in {args.out}")
    return 0 if summary["tasks"] else 1


def _corpus(args) -> int:
    if args.history is not None:
        return _history(args)
    if args.package:
        name, _, version = args.package.partition("==")
        if not version:
            print("--package needs NAME==VERSION", file=sys.stderr)
            return 2
        spec = PackageSpec(
            name=name,
            version=version,
            sha256=args.sha256 or "",
            unpinned=not args.sha256,
            source=args.source or "",
            split=args.split,
        )
        cfg = CorpusConfig(packages=[spec])
    else:
        cfg = load_corpus_config(args.config or CORPUS_CONFIG)
    if args.max_tried:
        cfg = cfg.model_copy(update={"max_tried": args.max_tried})
    try:
        summary = build_corpus(cfg, args.out, Path(args.cache), progress=PhasePrinter())
    except FetchError as e:  # a bad pin or an unbuildable sdist: said before any work, without a traceback
        print(e, file=sys.stderr)
        return 2
    for r in summary["packages"]:
        print(
            f"{r['package']}: tried {r['tried']}, kept {r['kept']}, dropped {r['dropped']}, "
            f"build {r['build_s']} s, sha256 {r.get('sha256', '')}"
            + (f"\n  UNUSABLE: {r['unusable']}" if r.get("unusable") else "")
        )
    per_split = ", ".join(f"{summary[s]} {s}" for s in CORPUS_SPLITS)
    print(f"{summary['tasks']} tasks ({per_split}) in {args.out}")
    # a build that yields nothing is a failure the shell should see
    return 0 if summary["tasks"] else 1


def _engine(args):
    if args.agent not in ("model", "free"):
        return None
    if args.engine == "hf":
        from planact.engines.hf import HFEngine
        from planact.models import load_model
        from planact.registry import resolve_model

        model, tokenizer = load_model(resolve_model(args.model))
        return HFEngine(model.eval(), tokenizer, max_batch=32)
    from planact.engine_config import AnthropicConfig, OpenAIConfig
    from planact.engines.api import AnthropicEngine, OpenAIEngine

    if args.engine == "anthropic":
        key = args.api_key_env or "ANTHROPIC_API_KEY"
        return AnthropicEngine(AnthropicConfig(base_url=args.base_url, model=args.model, api_key_env=key))
    return OpenAIEngine(OpenAIConfig(base_url=args.base_url, model=args.model, api_key_env=args.api_key_env))


def _evaluate_free(args, tasks) -> list[dict]:
    """Free-form edits: one reply per task from the engine (free) or the scripted gold fix (gold-free)."""
    from graph_planner.free_eval import engine_replies, evaluate_free, gold_replies

    replier = gold_replies if args.agent == "gold-free" else engine_replies(_engine(args), args.max_new_tokens)
    return evaluate_free(tasks, replier, args.workers, args.test_cpu_s, args.telemetry, progress=PhasePrinter())


def _evaluate(args) -> int:
    from graph_planner.env import EnvLimits
    from graph_planner.evaluate import evaluate_local, summarize
    from graph_planner.tasks import load_tasks

    tasks = load_tasks(args.tasks, split=args.split, limit=args.limit)
    limits = EnvLimits(test_runs=args.budget_tests)
    t0 = time.monotonic()
    if args.agent in ("free", "gold-free"):
        results = _evaluate_free(args, tasks)
    else:
        results = evaluate_local(
            tasks,
            args.agent,
            args.workers,
            limits,
            args.telemetry,
            engine=_engine(args),
            progress=PhasePrinter(),
            proposals=args.proposals,
        )
    summary = summarize(results, time.monotonic() - t0)
    if args.json:
        Path(args.json).write_text(json.dumps({"summary": summary, "episodes": results}, indent=1))
    for row in summary["by_package"]:
        print(f"  {row['package']}: {row['solved']}/{row['tasks']}")
    if summary["judged"] < summary["tasks"]:
        print(
            f"  {summary['tasks'] - summary['judged']} of {summary['tasks']} tasks unjudged: {UNJUDGED} ({HOW_TO_JAIL})"
        )
    print(
        f"solve rate {summary['solve_rate']:.3f} ({summary['solved']}/{summary['judged']}), "
        f"mean test runs {summary['mean_test_runs']:.2f}, seconds per task {summary['mean_seconds']:.2f}, "
        f"malformed {summary['malformed']}, refused {summary['refused']}, unjudged {summary['unjudged']}, "
        f"wall {summary['wall_s']} s"
    )
    return 0


def main(argv: list[str] | None = None) -> int:
    """Entry point of `planact-repair`."""
    ap = argparse.ArgumentParser(prog="planact-repair", description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("corpus", help="build tasks from pinned packages")
    c.add_argument(
        "--config",
        help=f"corpus YAML (ignored with --package; default {CORPUS_CONFIG}, or {HISTORY_CONFIG} with --history)",
    )
    c.add_argument(
        "--history",
        nargs="*",
        metavar="NAME OLD NEW",
        help="release-history tasks (split real) from the pair NAME OLD -> NEW, or every pair of the config",
    )
    c.add_argument("--package", help="one package NAME==VERSION instead of the config")
    c.add_argument("--sha256", help="the sdist's sha256 (without it the fetch is unpinned and the hash is printed)")
    c.add_argument("--source", help="a local source folder instead of fetching the sdist")
    c.add_argument("--split", default="train", choices=CORPUS_SPLITS)
    c.add_argument("--out", required=True, help="corpus folder")
    c.add_argument("--cache", default=str(DEFAULT_CACHE), help="sdist cache folder")
    c.add_argument("--max-tried", type=int, default=0, help="mutants validated per package (0 = config's)")
    e = sub.add_parser("evaluate", help="run an agent on tasks")
    e.add_argument(
        "--agent",
        default="rule",
        choices=["rule", "model", "free", "gold-free"],
        help="rule; model (JSON actions from --engine); free (--engine writes the corrected function, the "
        "task's own function given: docs/code-repair.md 'Free-form edits'); gold-free (the scripted gold "
        "fix in that format: the positive control). free and gold-free judge only tasks with the call jail",
    )
    e.add_argument("--tasks", required=True, help="corpus folder or JSONL file")
    e.add_argument("--split", choices=TASK_SPLITS, help="corpus split (default: all)")
    e.add_argument("--limit", type=int, default=0, help="first N tasks only")
    e.add_argument("--budget-tests", type=int, default=6, help="test runs per episode before Submit")
    e.add_argument(
        "--proposals",
        type=int,
        default=0,
        help="rule agent: repository proposals a function (statements of its module put back), tried last",
    )
    e.add_argument("--workers", type=int, default=1, help="parallel sandbox slots")
    e.add_argument("--telemetry", help="folder for per-step JSONL")
    e.add_argument("--json", help="write the summary and episodes here")
    e.add_argument("--engine", default="openai", choices=["openai", "anthropic", "hf"], help="model / free agent")
    e.add_argument("--base-url", default="http://127.0.0.1:8000/v1", help="model / free agent: API endpoint")
    e.add_argument("--model", default="default", help="model / free agent: model name (hf: folder or planact:<name>)")
    e.add_argument("--max-new-tokens", type=int, default=1024, help="free agent: reply length limit")
    e.add_argument(
        "--test-cpu-s", type=float, default=DEFAULT_TEST_CPU_S, help="free agents: CPU-seconds limit of a test run"
    )
    e.add_argument("--api-key-env", default="", help="model agent: variable holding the key ('' = none)")
    args = ap.parse_args(argv)
    return _corpus(args) if args.cmd == "corpus" else _evaluate(args)


if __name__ == "__main__":
    raise SystemExit(main())
