"""Is the gold fix reachable? Per held-out task, which candidates hold the task's gold fix, per mutation kind.

  token       the buggy function's token-level edits (what the mutation operators undo)
  inverse     a negated `if` / `while` condition flipped back, a bool default flipped, an int default +-1
  repository  a default a same-named parameter has elsewhere in the module; a statement or else-less `if`
              found elsewhere in the module, inserted into a gap of the
              function where every name it reads is bound (graph_planner.proposals)
  model       with --model: the statement a causal language model writes next at each gap of the function,
              given the module text before it; counted only when the task's tests pass through Submit (the
              patch check, then FAIL_TO_PASS + PASS_TO_PASS on a clean checkout in the sandbox)

Prints per split the share reachable by each source added in turn, per kind the counts, the repository
proposals per task and how many gold fixes sit within the first 16 / 64 / 256 of them (the cap an agent's
menu keeps: env.repair.proposals, `planact-repair evaluate --proposals`), and for the model its proposals,
passing proposals and seconds per gap.

    python benchmarks/reachable.py --corpus runs/corpus
    python benchmarks/reachable.py --corpus runs/corpus --model planact:smollm2-135m-instruct --kinds remove_stmt
    python benchmarks/reachable.py --corpus DIR --model tiny       # a tiny untrained model: the path only (tests)
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import textwrap
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from graph_planner.candidates import edits_from_sites, function_text, gold_source, same_function  # noqa: E402
from graph_planner.env_config import RepairEnvConfig  # noqa: E402
from graph_planner.judge import base_text, submit_texts  # noqa: E402
from graph_planner.patching import PatchError, apply_diff  # noqa: E402
from graph_planner.proposals import model_proposals, repository_proposals  # noqa: E402
from graph_planner.provenance import MODEL, UNJUDGED  # noqa: E402
from graph_planner.result_cache import ResultCache  # noqa: E402
from graph_planner.runtime import LocalRuntime  # noqa: E402
from graph_planner.tasks import load_tasks  # noqa: E402
from graph_planner.team.context import split_of  # noqa: E402
from planact.models import tiny_code_model  # noqa: E402

SOURCES = ("token", "inverse", "repository", "model")
STRUCTURAL = ("remove_stmt", "remove_if")
CAPS = (16, 64, 256)  # env.repair.proposals / --proposals values worth comparing: how many of those fixes a cap keeps


def causal_lm(path: str, context_tokens: int, max_new_tokens: int = 40):
    """A greedy `generate(prompt) -> continuation` of a causal LM (a folder, or a planact: alias), the prompt
    cut to its last `context_tokens` tokens."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from planact.registry import resolve_model

    folder = resolve_model(path)
    tok = AutoTokenizer.from_pretrained(folder)
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()
    pad = tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id

    def generate(prompt: str) -> str:
        ids = tok(prompt, return_tensors="pt").input_ids[:, -context_tokens:]
        with torch.no_grad():
            out = model.generate(ids, max_new_tokens=max_new_tokens, do_sample=False, pad_token_id=pad)
        return tok.decode(out[0, ids.shape[1] :], skip_special_tokens=True)

    return generate


def task_row(task, split: str, generate, runtime, cache: ResultCache, max_gaps: int) -> dict:
    """Where the task's gold fix is reachable, and (with `generate`) whether a model proposal resolves it."""
    file, function, kind = task.meta.get("file", ""), task.meta.get("function", ""), task.meta.get("mutation", "")
    base = base_text(task, file)
    row = {"task": task.instance_id, "split": split, "kind": kind, "source": "", "proposals": 0}
    try:
        (fixed,) = apply_diff(task.gold_patch, lambda p: base, {file}).values()
    except (PatchError, ValueError):
        return row
    found = function_text(base, function)
    if found is None:
        return row
    first, source = found
    row["source"] = gold_source(file, function, base, fixed)
    proposed = repository_proposals(textwrap.dedent(source), base, first)
    row["proposals"] = len(proposed)
    if row["source"] == "repository":  # where the gold fix sits in the proposals' order (what a cap keeps)
        want = function_text(fixed, function)[1]
        row["proposal_rank"] = next((k for k, (*_, new) in enumerate(proposed) if same_function(new, want)), None)
    if generate is not None and kind in STRUCTURAL:
        prefix = "".join(base.splitlines(True)[: first - 1])
        gaps = []

        def timed(prompt: str) -> str:
            t0 = time.perf_counter()
            out = generate(prompt)
            gaps.append(time.perf_counter() - t0)
            return out

        sites = model_proposals(textwrap.dedent(source), prefix, timed, max_gaps)
        why = [_fails(c, base, task, runtime, cache) for c in edits_from_sites(file, first, source, sites)]
        # a model's line is model text: judged only on a task with the call jail (graph_planner.provenance)
        unjudged = sum(w == UNJUDGED for w in why)
        row |= {"model_proposals": len(sites), "model_passing": why.count(""), "model_unjudged": unjudged}
        row["model_s"] = gaps
    return row


def _fails(candidate, base: str, task, runtime, cache: ResultCache) -> str:
    new = base.replace(candidate.edit["old"], candidate.edit["new"], 1)
    return submit_texts(runtime, cache, task, {candidate.edit["file"]: new}, origin=MODEL)


def table(rows: list[dict]) -> list[str]:
    """Per split: reachable share as each source is added; per kind: counts by source."""
    with_model = any("model_passing" in r for r in rows)
    sources = SOURCES if with_model else SOURCES[:3]
    lines = [f"{'split':<18} {'tasks':>5} " + " ".join(f"{'+' + s:>11}" for s in sources)]
    for split in sorted({r["split"] for r in rows}):
        rs = [r for r in rows if r["split"] == split]
        shares, got = [], set()
        for s in sources:
            got |= {r["task"] for r in rs if r["source"] == s or s == "model" and r.get("model_passing")}
            shares.append(len(got) / len(rs))
        lines.append(f"{split:<18} {len(rs):>5} " + " ".join(f"{x:>11.2f}" for x in shares))
        for kind in sorted({r["kind"] for r in rs}):
            ks = [r for r in rs if r["kind"] == kind]
            parts = [f"{s} {sum(r['source'] == s for r in ks)}" for s in SOURCES[:3]]
            if with_model and kind in STRUCTURAL:
                parts.append(f"model {sum(bool(r.get('model_passing')) for r in ks)}")
            reach = sum(bool(r["source"] or r.get("model_passing")) for r in ks)
            lines.append(f"  {kind:<12} {reach:>3}/{len(ks):<3} ({', '.join(parts)})")
    lines.append(f"repository proposals per task: median {statistics.median(r['proposals'] for r in rows):.0f}")
    ranks = [r["proposal_rank"] for r in rows if r.get("proposal_rank") is not None]
    within = ", ".join(f"first {n}: {sum(k < n for k in ranks)}" for n in CAPS)
    lines.append(f"gold fixes among the repository proposals: {len(ranks)}; within the {within}")
    timed = [t for r in rows for t in r.get("model_s", [])]
    if with_model:
        tried = [r for r in rows if "model_proposals" in r]
        lines.append(
            f"model: {len(tried)} tasks, {sum(r['model_proposals'] for r in tried)} proposals, "
            f"{sum(r['model_passing'] for r in tried)} pass Submit, "
            f"{sum(r.get('model_unjudged', 0) for r in tried)} unjudged (no call jail), "
            f"{statistics.fmean(timed or [0]):.2f} s per gap"
        )
    return lines


def main(argv: list[str] | None = None) -> list[str]:
    """Parse arguments, measure, print the table; returns its lines."""
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--corpus", default="runs/corpus", help="A corpus folder (train.jsonl, heldout.jsonl).")
    p.add_argument("--splits", nargs="+", default=["unseen_functions", "unseen_packages", "unseen_2025"])
    p.add_argument("--limit", type=int, default=None, help="Tasks per split (default: all).")
    p.add_argument("--kinds", nargs="+", default=None, help="Only tasks of these mutation kinds (default: all).")
    p.add_argument("--model", default=None, help="A causal LM folder, planact: alias, or `tiny`, proposing statements.")
    p.add_argument("--context-tokens", type=int, default=1024, help="Module text before the gap the model sees.")
    p.add_argument("--max-gaps", type=int, default=24, help="Gaps per function the model writes a statement at.")
    a = p.parse_args(argv)
    t0 = time.time()
    model = str(tiny_code_model(Path(tempfile.mkdtemp()) / "tiny")) if a.model == "tiny" else a.model
    generate = causal_lm(model, a.context_tokens) if model else None
    frac, count, jobs = RepairEnvConfig().unseen_function_frac, dict.fromkeys(a.splits, 0), []
    for task in load_tasks(Path(a.corpus)):
        split = split_of(task, frac)
        if a.kinds and task.meta.get("mutation") not in a.kinds:
            continue
        if split in count and (a.limit is None or count[split] < a.limit):
            count[split] += 1
            jobs.append((split, task))
    runtime, cache = LocalRuntime(), ResultCache(Path(a.corpus) / "results-cache.jsonl")
    try:
        rows = [task_row(task, split, generate, runtime, cache, a.max_gaps) for split, task in jobs]
    finally:
        runtime.close()
    lines = table(rows) + [f"{len(rows)} tasks in {time.time() - t0:.0f} s"]
    print("\n".join(lines))
    return lines


if __name__ == "__main__":
    main()
