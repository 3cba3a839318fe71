"""Evaluating a free-form patch model on corpus tasks (`planact-repair evaluate --agent free | gold-free`).

The patch model alone: each task's target is the function its bug sits in (the localisation is given,
so the figure is the patch model's), the prompt is graph_planner.free_edit.free_prompt, one reply per
task. Replies are parsed (free_edit.parse_reply) and the edits judged in Submit mode by the same sandbox
path every candidate edit takes (graph_planner.team.sandbox.Sandbox.judge: the patch check, then the
guarded FAIL_TO_PASS run and, when those pass, FAIL_TO_PASS + PASS_TO_PASS). Malformed replies and
refused edits score 0 and are counted. A reply is text a model wrote, judged only through the call jail
(graph_planner.provenance): a task without the jail is not prompted and not run; it counts as unjudged
('unjudged': 1, 'judged': False; outside the solve rate: graph_planner.evaluate.summarize).

`gold-free` is the positive control: a scripted "model" that replies with each task's gold fix of its
function in the format. It scores 1 wherever the format can express the gold fix, which says the
prompt -> reply -> parse -> edit -> check -> verdict path loses nothing.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from graph_planner.free_edit import free_prompt, gold_reply, parse_reply, target_name, task_target
from graph_planner.judge import DEFAULT_TEST_CPU_S
from graph_planner.provenance import MODEL, UNJUDGED
from graph_planner.tasks import RepairTask
from graph_planner.team.sandbox import Sandbox
from planact.progress import Phase, ProgressFn

Replier = Callable[[list[RepairTask], list[str]], list[str]]
"""(tasks, prompts) -> one reply per task."""


def gold_replies(tasks: list[RepairTask], prompts: list[str]) -> list[str]:
    """The scripted gold model: each task's gold fix of its function, in the format ('' when none)."""
    return [gold_reply(t) or "" for t in tasks]


def engine_replies(engine, max_new_tokens: int = 1024, temperature: float = 0.0) -> Replier:
    """A planact engine (hf, openai, anthropic, sglang) as the patch model: one reply per prompt."""
    from planact.engines.base import SamplingParams

    params = SamplingParams(temperature=temperature, max_new_tokens=max_new_tokens, n=1, seed=0)

    def replies(tasks: list[RepairTask], prompts: list[str]) -> list[str]:
        return [group[0].text if group else "" for group in engine.generate(prompts, params)]

    return replies


def evaluate_free(
    tasks: list[RepairTask],
    replier: Replier,
    workers: int = 1,
    test_cpu_s: float = DEFAULT_TEST_CPU_S,
    telemetry_dir: str | Path | None = None,
    progress: ProgressFn | None = None,
) -> list[dict]:
    """One reply per task with the call jail, judged in Submit mode (the others unjudged); per-task results in
    the shape `evaluate.summarize` reads. `progress` hears the replies (one batch) and each verdict."""
    t0 = time.monotonic()
    # no prompt for a task without the jail: its reply could not be judged (and decoding is the costly part)
    targets = [task_target(t) if t.jail else None for t in tasks]
    prompts = [free_prompt(tg[0], tg[1], t.problem_statement) if tg else "" for t, tg in zip(tasks, targets)]
    asked = [i for i, tg in enumerate(targets) if tg]
    writing = Phase("free-form replies", len(asked), progress)
    got = replier([tasks[i] for i in asked], [prompts[i] for i in asked]) if asked else []
    writing.advance(len(asked))
    replies = dict(zip(asked, got))
    parsed = {
        i: parse_reply(replies[i], tasks[i].meta["file"], targets[i][1], target_name(targets[i][0])) for i in asked
    }
    jobs = [i for i in asked if parsed[i].edit is not None]
    box = Sandbox(workers, None, test_cpu_s, telemetry_dir)
    judging = Phase("free-form edits judged", len(jobs), progress)

    def judged(verdict: dict) -> None:
        judging.advance(note="solved" if verdict.get("resolved") else "not solved")

    try:
        edits = [(tasks[i], parsed[i].edit) for i in jobs]
        verdicts = dict(zip(jobs, box.judge_many(edits, "eval", MODEL, on_judged=judged)))
    finally:
        box.close()
    out = []
    for i, task in enumerate(tasks):
        v = verdicts.get(i, {})
        error = "" if i in verdicts else parsed[i].error if i in parsed else "no single function of its file to fix"
        error = error if task.jail else UNJUDGED
        out.append(
            {
                "instance_id": task.instance_id,
                "resolved": bool(v.get("resolved")),
                "steps": 1,
                "test_runs": v.get("runs", 0),
                "seconds": 0.0,  # filled below: the judging is batched
                # a task with no single target function (a fix over two) gets no prompt: unsolved, not malformed
                "malformed": int(i in parsed and parsed[i].edit is None),
                "refused": int(bool(v.get("refused"))),
                "patch_errors": 0,
                "tampering": v.get("tampering", 0),
                "unjudged": int(not task.jail),
                "judged": bool(task.jail),
                "error": (v.get("error") or error)[:300],
                "package": task.repo,
                "mutation": task.meta.get("mutation", ""),
                "difficulty": task.meta.get("difficulty", ""),
                "split": task.meta.get("split", ""),
                "fallbacks": 0,
            }
        )
    per_task = (time.monotonic() - t0) / max(1, len(tasks))
    for r in out:
        r["seconds"] = round(per_task, 2)
    return out
