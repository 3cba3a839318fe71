"""Held-out evaluation of the repair team at small test budgets, beside the rule agent and random guessing.

A task's budget is the number of Submits (each runs FAIL_TO_PASS + PASS_TO_PASS): solved at budget b
when one of the first b edits a system proposes passes. Systems:
  team    the planner's greedy episode names the target; the actor's ranking of its candidate edits
          gives the edits in order (decoding 'free': its one greedy reply is the only edit, at every
          budget, and malformed replies are counted in '<split>/team/malformed');
  rule    the rule agent's own order (candidates on traceback lines first, best-ranked function first);
  random  edits drawn uniformly from the candidates of the rule agent's top-ranked function.
All systems see the same offered functions and run in the same sandbox with the same cache. Splits: the
corpus's held-out ones, and 'real' (release-history fixes, env.repair.eval_real_corpus: graph_planner.team.real),
each with the share the localisation and the candidate edits can reach at all ('<split>/reach/*').
"""

from __future__ import annotations

import random
from collections.abc import Callable
from functools import partial

from graph_planner.agents.rule import RuleAgent
from graph_planner.provenance import MENU, MODEL
from graph_planner.team import free, prompts
from graph_planner.team.real import fix_functions, reach
from planact.progress import Phase, ProgressFn


def rule_order(ctx) -> list[dict]:
    """The rule agent's edits for a task, in the order it would try them."""
    agent = RuleAgent(memory_nodes=len(ctx.nodes))
    agent.trace_lines = {(v.file, ln) for v in ctx.nodes for ln in v.trace_lines}
    return [c.edit for c in agent.order([(v.file, v.candidates()) for v in ctx.nodes])]


def random_order(ctx, budget: int, rng: random.Random) -> list[dict]:
    """`budget` distinct random candidates of the top-ranked function."""
    cands = ctx.nodes[0].candidates() if ctx.nodes else []
    return [c.edit for c in rng.sample(cands, min(budget, len(cands)))]


# Tasks per batch of the team's greedy episodes: a real split of 172 tasks is ~21 minutes of episodes on 2 cores,
# which must report as it goes (a batch of 16 still fills the engine's batched forward passes).
EPISODE_BATCH = 16


def team_order(
    env, ids: list[str], planner, actor, budget: int, done: Callable[[int], None] | None = None
) -> tuple[dict[str, list[dict]], dict[str, str]]:
    """The team's edits per task (greedy plan, then the actor's ranking) and its chosen targets; `done` hears
    how many tasks each batch of episodes finished."""
    out, targets = {}, {}
    for start in range(0, len(ids), EPISODE_BATCH):
        part = ids[start : start + EPISODE_BATCH]
        batch = [{"task_id": i} for i in part]
        plans = env.plan(batch, planner, seed=env.cfg.seed, greedy=True)
        answers = actor.choose(env.actor_requests(batch, plans), temperature=0.0, n=1, seed=env.cfg.seed)
        for i, ep, ans in zip(part, plans, answers):
            targets[i] = ep[0]["target"]
            _, cands = prompts.actor_options(env._view(i, targets[i]))
            ranking = ans[0].meta["ranking"] if ans else []
            out[i] = [cands[k].edit for k in ranking[:budget]]
        if done is not None:
            done(len(part))
    return out, targets


def solve_rates(
    env,
    attempts: dict[str, list[dict]],
    budget: int,
    origin: str = MODEL,
    done: Callable[[], None] | None = None,
) -> dict[int, float]:
    """Solve rate at every budget 1..budget (edits of `origin` judged in eval mode, shared cache); `done`
    hears each edit as it is judged."""
    jobs = [(env.tasks[i], e) for i, edits in attempts.items() for e in edits[:budget]]
    heard = None if done is None else (lambda _verdict: done())
    verdicts = iter(env.sandbox.judge_many(jobs, "eval", origin, on_judged=heard))
    first_solved = []
    for edits in attempts.values():
        ok = [next(verdicts)["resolved"] for _ in edits[:budget]]
        first_solved.append(next((k for k, v in enumerate(ok) if v), None))
    n = max(1, len(attempts))
    return {b: sum(1 for k in first_solved if k is not None and k < b) / n for b in range(1, budget + 1)}


def spread(ids: list[str], limit: int) -> list[str]:
    """At most `limit` of `ids` (instance ids `<package>__<hash>`, sorted), taken in turn from each package.

    A plain prefix of the sorted ids would fill a capped evaluation with the alphabetically first package."""
    seen: dict[str, int] = {}
    turn = {}
    for i in ids:  # the k-th task of a package is taken in round k
        pkg = i.split("__", 1)[0]
        turn[i] = (seen.get(pkg, 0), pkg)
        seen[pkg] = seen.get(pkg, 0) + 1
    return sorted(sorted(ids, key=turn.__getitem__)[:limit])


def evaluate_team(env, planner, actor, progress: ProgressFn | None = None) -> dict[str, float]:
    """Metrics '<split>/<system>/solve_at_<b>', '<split>/team/localised' and task counts; `progress` hears
    two phases: the team's episodes, task by task, then every system's edits judged, edit by edit."""
    r = env.r
    out: dict[str, float] = {}
    before = dict(env.sandbox.stats)
    splits = [
        (split, spread(env.split.get(split, []), limit))
        for split, limit in (
            ("unseen_functions", r.eval_unseen_functions),
            ("unseen_packages", r.eval_unseen_packages),
            ("unseen_2025", r.eval_unseen_2025),
            ("real", r.eval_real),
        )
    ]
    splits = [(split, ids) for split, ids in splits if ids]
    n_tasks = sum(len(ids) for _, ids in splits)
    # Minutes each on a pretrained model: first the team's greedy episodes of every split, then every system's
    # edits judged in the sandbox (the episodes do not depend on any verdict, so the order changes no figure).
    episodes = Phase(f"held-out evaluation: team episodes ({n_tasks} tasks)", n_tasks, progress)
    teams: dict[str, tuple[list[str], dict, dict]] = {}  # per split: the tasks offering a function, edits, targets
    for split, all_ids in splits:
        # A real task whose localisation offers no function at all counts unsolved by every system (nothing to try).
        ids = [i for i in all_ids if env.ctx[i].nodes]
        if len(ids) < len(all_ids):
            episodes.advance(len(all_ids) - len(ids), note=f"{split}: {len(all_ids) - len(ids)} offer no function")
        if not ids:
            team, targets = {}, {}
        elif env.free:
            team, targets, malformed = free.team_order(env, ids, planner, actor)
            out[f"{split}/team/malformed"] = float(malformed)
            episodes.advance(len(ids), note=split)
        else:
            team, targets = team_order(env, ids, planner, actor, r.eval_budget, partial(episodes.advance, note=split))
        teams[split] = (ids, team | {i: [] for i in all_ids if i not in team}, targets)
    systems = {}
    for split, all_ids in splits:
        rng = random.Random(f"{env.cfg.seed}:random-baseline")
        systems[split] = {
            "team": teams[split][1],
            "rule": {i: rule_order(env.ctx[i])[: r.eval_budget] for i in all_ids},
            "random": {i: random_order(env.ctx[i], r.eval_budget, rng) for i in all_ids},
        }
    n_edits = sum(len(e[: r.eval_budget]) for by in systems.values() for a in by.values() for e in a.values())
    judged = Phase(f"held-out evaluation: edits judged ({n_edits} edits, {n_tasks} tasks)", n_edits, progress)
    for split, all_ids in splits:
        for name, attempts in systems[split].items():
            # the team's free reply is model text; every other edit here is a candidate planact enumerated
            origin = MODEL if name == "team" and env.free else MENU
            for b, rate in solve_rates(
                env, attempts, r.eval_budget, origin, partial(judged.advance, 1, f"{split}: {name}")
            ).items():
                out[f"{split}/{name}/solve_at_{b}"] = rate
        ids, _, targets = teams[split]
        hits = sum(targets[i] in fix_functions(env.tasks[i]) for i in ids)  # a real fix may change several
        out[f"{split}/team/localised"] = hits / len(all_ids)
        out |= {f"{split}/{k}": v for k, v in reach(env, all_ids).items()}
        out[f"{split}/tasks"] = float(len(all_ids))
        if getattr(env, "left_out", {}).get(split):  # free decoding: tasks without the call jail, not evaluated
            out[f"{split}/left_out_no_jail"] = float(env.left_out[split])
    # Evaluation Submits run FAIL_TO_PASS + PASS_TO_PASS (training runs only FAIL_TO_PASS): counted apart,
    # and of those the whole-suite runs (edits whose FAIL_TO_PASS tests passed on their own).
    out["sandbox/eval_test_runs"] = float(env.sandbox.stats["test_runs"] - before["test_runs"])
    out["sandbox/eval_full_runs"] = float(env.sandbox.stats["full_runs"] - before["full_runs"])
    out["sandbox/eval_cache_hits"] = float(env.sandbox.stats["cache_hits"] - before["cache_hits"])
    out["sandbox/eval_tampering"] = float(env.sandbox.stats["tampering"] - before["tampering"])
    out["sandbox/eval_unjudged"] = float(env.sandbox.stats["unjudged"] - before["unjudged"])
    return out
