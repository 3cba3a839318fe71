"""Free-form replies on a held-out split: the patch model's sampling speed, and the whole evaluation, in one run.

Each task's prompt is the free-form one (graph_planner.free_edit.free_prompt: the buggy function, the problem
statement, "reply with the corrected function"). Two arms generate the same greedy replies to the same prompts
with the same model:

  engine  planact's HF engine: the prompts batched, with the KV cache (what a run's actor and
          `planact-repair evaluate --agent free` use);
  plain   transformers' `model.generate`, one prompt at a time (the usual baseline).

Prints tokens/s of each arm and the ratio, measured in this run. Then the engine's replies are parsed and
judged through the path every free-form edit takes (graph_planner.free_eval.evaluate_free: the patch check,
then the guarded test runs) and the solve rate, malformed and refused replies and seconds per task print,
beside the scripted gold model's on the same tasks (1.0 wherever the format holds the gold fix: the path's
positive control). A reply is model text, judged only on a task with the call jail (graph_planner.provenance):
the tasks are the split's first N with the jail and one target function.

    python benchmarks/free_form.py                           # SmolLM2-135M-Instruct, 12 jailed held-out tasks
    python benchmarks/free_form.py --split unseen_2025 --n 24 --max-new-tokens 256
    python benchmarks/free_form.py --tiny                    # a tiny local model on a built-in package (the test)
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from repair_throughput import tiny_corpus  # noqa: E402  (this script's folder is on sys.path)

from graph_planner.evaluate import summarize  # noqa: E402
from graph_planner.free_edit import free_prompt, task_target  # noqa: E402
from graph_planner.free_eval import evaluate_free, gold_replies  # noqa: E402
from graph_planner.provenance import HOW_TO_JAIL  # noqa: E402
from graph_planner.tasks import load_tasks  # noqa: E402


def plain_generate(model, tok, prompts: list[str], max_new: int) -> tuple[list[str], int, float]:
    """transformers' generate, one prompt at a time, greedy: (replies, new tokens, seconds)."""
    import torch

    from planact.engines.base import encode_prompt

    texts, tokens, t0 = [], 0, time.perf_counter()
    with torch.no_grad():
        for p in prompts:
            ids = torch.tensor([encode_prompt(tok, p)])  # the ids the engine feeds the model
            out = model.generate(
                input_ids=ids,
                attention_mask=torch.ones_like(ids),
                max_new_tokens=max_new,
                do_sample=False,
                pad_token_id=tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id,
            )
            new = out[0, ids.shape[1] :]
            tokens += int(new.shape[0])
            texts.append(tok.decode(new, skip_special_tokens=True))
    return texts, tokens, time.perf_counter() - t0


def engine_generate(engine, prompts: list[str], max_new: int) -> tuple[list[str], int, float]:
    """The HF engine, all prompts batched, greedy: (replies, new tokens, seconds)."""
    from planact.engines.base import SamplingParams

    params = SamplingParams(temperature=0.0, max_new_tokens=max_new, n=1, seed=0)
    t0 = time.perf_counter()
    groups = engine.generate(prompts, params)
    seconds = time.perf_counter() - t0
    return [g[0].text for g in groups], sum(len(g[0].token_ids) for g in groups), seconds


def line(name: str, summary: dict) -> str:
    """One evaluation's figures on one line."""
    return (
        f"{name}: solve rate {summary['solve_rate']:.3f} ({summary['solved']}/{summary['judged']}), "
        f"malformed {summary['malformed']}, refused {summary['refused']}, unjudged {summary['unjudged']}, "
        f"seconds per task {summary['mean_seconds']:.2f}"
    )


def main() -> None:
    """Measure both arms' speed, then evaluate the engine's replies and the gold control."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tasks", default="runs/corpus", help="a built corpus folder")
    ap.add_argument("--split", default="heldout")
    ap.add_argument(
        "--n", type=int, default=12, help="tasks (the first N of the split with the call jail and one target function)"
    )
    ap.add_argument("--model", default="planact:smollm2-135m-instruct")
    ap.add_argument("--max-new-tokens", type=int, default=384)
    ap.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    ap.add_argument("--workers", type=int, default=2, help="sandbox slots judging the replies")
    ap.add_argument("--tiny", action="store_true", help="a tiny local model on a built-in package (tests)")
    args = ap.parse_args()

    import torch

    from planact.engines.hf import HFEngine
    from planact.models import load_model, tiny_code_model
    from planact.registry import resolve_model

    if args.threads:
        torch.set_num_threads(args.threads)
    if args.tiny:
        tmp = Path(tempfile.mkdtemp(prefix="free-bench-"))
        folder, split, path, max_new = tiny_corpus(tmp, jail=True), None, tiny_code_model(tmp / "model"), 16
    else:
        folder, split, path, max_new = Path(args.tasks), args.split, resolve_model(args.model), args.max_new_tokens
    tasks = [t for t in load_tasks(folder, split=split) if task_target(t) and t.jail][: args.n]
    if not tasks:
        raise SystemExit(
            f"no task with the call jail and a single target function in {folder} ({split or 'all splits'}): "
            f"{HOW_TO_JAIL}"
        )
    prompts = [free_prompt(*task_target(t)[:2], t.problem_statement) for t in tasks]
    model, tok = load_model(path, native=False)  # the baseline is transformers' generate
    model.eval()
    engine = HFEngine(model, tok, name="free-bench")
    print(f"{len(tasks)} tasks of {folder} ({split or 'all splits'}), {path}, max_new_tokens {max_new}, ", end="")
    print(f"{torch.get_num_threads()} torch threads")

    engine_generate(engine, prompts[:1], 4)  # warm: first-call allocations, not the arms' speed
    replies, n_eng, s_eng = engine_generate(engine, prompts, max_new)
    _, n_plain, s_plain = plain_generate(model, tok, prompts, max_new)
    r_eng, r_plain = n_eng / s_eng, n_plain / s_plain
    print(f"engine (batched, KV cache): {n_eng} tokens in {s_eng:.1f} s, {r_eng:.1f} tokens/s")
    print(f"plain generate, one by one: {n_plain} tokens in {s_plain:.1f} s, {r_plain:.1f} tokens/s")
    print(f"ratio engine / plain: {r_eng / r_plain:.2f}x")

    by_id = {t.instance_id: r for t, r in zip(tasks, replies)}
    t0 = time.monotonic()
    model_rows = evaluate_free(tasks, lambda ts, _: [by_id[t.instance_id] for t in ts], args.workers)
    judged_s = time.monotonic() - t0
    t0 = time.monotonic()
    gold_rows = evaluate_free(tasks, gold_replies, args.workers)
    gold_s = time.monotonic() - t0
    print(line("model", summarize(model_rows, judged_s)) + f" (judging only; sampling {s_eng / len(tasks):.2f})")
    print(line("gold control", summarize(gold_rows, gold_s)))
    total = s_eng + judged_s
    print(f"free-form evaluation of {len(tasks)} tasks: {total:.0f} s ({total / len(tasks):.1f} s per task)")


if __name__ == "__main__":
    main()
