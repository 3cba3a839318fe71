"""The repair team's warm-start data: what each role imitates before RL (RepairTeamEnv.demonstrations).

Planner: the imperfect teacher's episodes (the rule agent's localisation) on every training task. Actor:
the true inverse edit of each validated training task (repeated 4x), then unvalidated token-level mutants
of the training packages' and the standard library's code up to the requested count; in file style, the
validated fixes alone; in free decoding, each offered bug's gold fix written in the reply format. Unseen
functions stay unseen: no example comes from them.
"""

from __future__ import annotations

import random

from graph_planner.corpus.fetch import git
from graph_planner.patching import PatchError, apply_diff
from graph_planner.team import file_prompts, free, prompts
from graph_planner.team.context import unseen_function


def fixed_file(task) -> tuple[str, str] | None:
    """(buggy, gold-fixed) text of the task's bug file, or None when the gold patch does not apply."""
    path = task.meta.get("file", "")
    try:
        buggy = git(task.repo_dir, "show", f"{task.base_commit}:{path}", strip=False)
        fixed = apply_diff(task.gold_patch, lambda p: buggy, {path})[path]
    except (PatchError, KeyError, RuntimeError):
        return None
    return buggy, fixed


def train_packages(env) -> dict[str, str]:
    """Unpacked folder name -> package name of the training packages."""
    tasks = [env.tasks[i] for i in env.split["train"]]
    return {f"{t.repo}-{t.meta.get('version', '')}": t.repo for t in tasks}


def sft_sources(env) -> list[tuple[str, str, str]]:
    """(package, path, text) of the training packages' code (unseen functions are filtered later)."""
    return [
        (pkg, p, t)
        for folder, pkg in sorted(train_packages(env).items())
        for p, t in prompts.package_files(env.corpus, {folder})
    ]


def demonstrations(env, role: str, count: int, rng: random.Random) -> list[tuple[str, str]]:
    """(prompt, answer) pairs for `role`'s warm start (see the module docstring)."""
    train = [env.ctx[i] for i in env.split["train"]]
    if role == "planner":
        return [pair for ctx in train for pair in env.teacher(ctx)]
    if env.free:  # the gold fix of each offered bug's function, written in the reply format
        pairs = free.demonstrations(env, fixed_file)
        return [pairs[rng.randrange(len(pairs))] for _ in range(count)] if pairs else []
    validated = []
    for ctx in train:
        texts = fixed_file(env.tasks[ctx.instance_id])
        if env.file_style:
            pair = true_function(env, ctx, *texts) if texts else None
        else:
            pair = prompts.true_edit(ctx, *texts, marks=env.r.actor_marks) if texts else None
        if pair:
            validated.append(pair)
    if env.file_style:  # a pretrained patch model learns from the validated fixes alone
        return [validated[rng.randrange(len(validated))] for _ in range(count)] if validated else []
    frac = env.r.unseen_function_frac
    sources = sft_sources(env)
    package_of = {path: pkg for pkg, path, _ in sources}

    def keep(path: str, qual: str) -> bool:
        # Unseen functions stay unseen: no warm-start example may come from them (standard library: all kept).
        return path not in package_of or not unseen_function(package_of[path], path, qual, frac)

    extra = prompts.unvalidated_demos(
        [(p, t) for _, p, t in sources] + prompts.stdlib_files(env.r.sft_extra_sources),
        env.r.max_function_chars,
        keep,
        rng,
        max(0, count - 4 * len(validated)),
        traced_fraction(env),
        env.r.actor_marks,
    )
    return validated * 4 + extra


def true_function(env, ctx, buggy: str, fixed: str) -> tuple[str, str] | None:
    """(file context, the fixed function) when the localisation offers the bug's function and a
    candidate edit turns the buggy file into the fixed one."""
    view = next((v for v in ctx.nodes if v.node == ctx.target), None)
    if view is None:
        return None
    texts, cands = file_prompts.edited_functions(view)
    for text, c in zip(texts, cands):
        if buggy.replace(c.edit["old"], c.edit["new"], 1) == fixed:
            return env.actor_request(ctx.instance_id, view)[0], text
    return None


def traced_fraction(env) -> float:
    """How often a training bug's line is on its failing tests' traceback (when its function is offered)."""
    hits = [
        env.tasks[c.instance_id].meta.get("line") in v.trace_lines
        for c in (env.ctx[i] for i in env.split["train"])
        for v in c.nodes
        if v.node == c.target
    ]
    return sum(hits) / len(hits) if hits else 0.0
