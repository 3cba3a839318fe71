"""The repair team's patch model in free mode (env.repair.decoding: free): it writes the corrected function.

The planner still chooses which offered function to repair (constrained, as in 'candidates'); the patch
model reads the plan's target function and the failing tests' output (graph_planner.free_edit.free_prompt)
and replies with the whole corrected function in the documented format. Each reply is parsed into the
same {file, old, new} edit a candidate is and judged by the same sandbox path; a malformed reply is no
edit (reward 0, counted in `actor/malformed`), a refused one is judged refused (reward 0, counted in
`actor/refused`).
"""

from __future__ import annotations

from graph_planner.free_edit import fence, free_prompt, parse_reply, target_name
from graph_planner.team.context import NodeView


def actor_prompt(env, task_id: str, view: NodeView) -> str:
    """The patch model's prompt for one target function of a task."""
    return free_prompt(view.node, view.source, env.tasks[task_id].problem_statement)


def edits(env, task_id: str, view: NodeView, replies: list[str]) -> list[dict | None]:
    """The edit each reply asks for on the target function (None: malformed)."""
    return [parse_reply(text, view.file, view.source, target_name(view.node)).edit for text in replies]


def demonstrations(env, fixed_file) -> list[tuple[str, str]]:
    """(prompt, reply) warm-start pairs: each training task whose bug the localisation offers, answered with
    its gold fix of the function in the format (`fixed_file(task)` -> (buggy, fixed) file texts or None)."""
    from graph_planner.candidates import function_text

    out = []
    for tid in env.split["train"]:
        ctx, task = env.ctx[tid], env.tasks[tid]
        view = next((v for v in ctx.nodes if v.node == ctx.target), None)
        texts = fixed_file(task) if view is not None else None
        found = function_text(texts[1], task.meta.get("function", "")) if texts else None
        if found:
            out.append((actor_prompt(env, tid, view), fence(found[1])))
    return out


def team_order(env, ids: list[str], planner, actor) -> tuple[dict[str, list[dict]], dict[str, str], int]:
    """The team's edit per task in evaluation (greedy plan, one greedy reply), its targets, and how many
    replies were malformed. A malformed reply is an empty attempt list: the task counts as unsolved."""
    batch = [{"task_id": i} for i in ids]
    plans = env.plan(batch, planner, seed=env.cfg.seed, greedy=True)
    answers = actor.generate(env.actor_requests(batch, plans), temperature=0.0, n=1, seed=env.cfg.seed)
    out, targets, malformed = {}, {}, 0
    for i, ep, ans in zip(ids, plans, answers):
        targets[i] = ep[0]["target"]
        (edit,) = edits(env, i, env._view(i, targets[i]), [ans[0].text if ans else ""])
        malformed += edit is None
        out[i] = [edit] if edit is not None else []
    return out, targets, malformed
