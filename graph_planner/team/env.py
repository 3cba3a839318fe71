"""The code-repair environment of the Plan/Act round (env.kind: repair): graph planner + patch model.

Planner (multi-turn, GiGPO): each of its G episodes per task reads up to `planner_reads` of the offered
functions and ends with a Repair plan naming its target; every turn is one sample whose observation
is the anchor state. Actor (GRPO): K edits per plan, chosen among the target's candidate edits from
the model's own distribution (decoding 'candidates'), or written as the whole corrected function
(decoding 'free', graph_planner.team.free). Reward: the edit's FAIL_TO_PASS run in the sandbox (1 = all
pass); the planner's episode earns the mean outcome of its plan's edits. Nothing a model outputs can
raise: an empty candidate set or a malformed reply scores 0 and is counted.

Free decoding judges text a model wrote, which runs only on a task with the call jail (graph_planner.
provenance): its task pool keeps only the corpus's jailed tasks, says how many it left out, and a corpus
without one fails before any work starts (`RepairEnvConfig.preflight`, again here).
"""

from __future__ import annotations

import atexit
import random
from functools import lru_cache
from pathlib import Path

from graph_planner.corpus.fetch import git
from graph_planner.provenance import HOW_TO_JAIL, MENU, MODEL
from graph_planner.team import demos, file_prompts, free, prompts
from graph_planner.team.context import attach_modules, load_contexts
from graph_planner.team.evaluate import evaluate_team
from graph_planner.team.real import load_real
from graph_planner.team.sandbox import Sandbox
from planact.progress import ProgressFn
from planact.rl.advantages import group_advantages
from planact.rl.gigpo import gigpo_advantages
from planact.rollout import RoundResult, sample_record

# 'real': the release-history fixes of env.repair.eval_real_corpus, evaluated only (graph_planner.team.real)
SPLITS = ("train", "unseen_functions", "unseen_packages", "unseen_2025", "real")


_CONTEXTS: dict[tuple, tuple] = {}


def _corpus(
    corpus: str,
    frac: float,
    nodes: int,
    kinds: tuple[str, ...],
    max_chars: int,
    workers: int,
    coverage: bool,
    progress: ProgressFn | None = None,
):
    # One load per process: every task of a round builds the env anew. (A dict, not lru_cache: the progress
    # callback is no part of the key.)
    key = (corpus, frac, nodes, kinds, max_chars, workers, coverage)
    if key not in _CONTEXTS:
        _CONTEXTS[key] = load_contexts(corpus, frac, nodes, list(kinds), max_chars, workers, coverage, progress)
    return _CONTEXTS[key]


@lru_cache(maxsize=4)
def _sandbox(cache: str, workers: int, timeout_s: float, telemetry: str) -> Sandbox:
    # One pool of slots per process, reused round after round (each slot is a working copy on disk),
    # removed when the process exits.
    box = Sandbox(workers, cache, timeout_s, telemetry)
    atexit.register(box.close)
    return box


class RepairTeamEnv:
    """Planner/actor code repair over a built corpus (planact.envs.base.RoundEnv)."""

    headline_keys = (
        "unseen_packages/team/solve_at_1",
        "unseen_functions/team/solve_at_1",
        "unseen_packages/team/solve_at_2",
        "unseen_functions/team/solve_at_2",
        "unseen_2025/team/solve_at_1",
        "unseen_2025/team/solve_at_2",
        "real/team/solve_at_1",  # release-history fixes (env.repair.eval_real_corpus)
        "real/team/solve_at_2",
    )

    def __init__(self, cfg, progress: ProgressFn | None = None):
        """`progress` hears the localisation contexts being built (a fresh corpus: tens of minutes)."""
        r = cfg.env.repair
        self.cfg, self.r = cfg, r
        self.free = r.decoding == "free"
        # The actor answers candidate sets (choose) or writes its edit (generate): what the round calls.
        self.actor_method = "generate" if self.free else "choose"
        self.corpus = Path(r.corpus).resolve()
        if not (self.corpus / "train.jsonl").is_file():
            raise FileNotFoundError(
                f"env.repair.corpus: no corpus at {self.corpus}; build it with `planact-repair "
                "corpus --config configs/repair-rl-corpus.yaml --out runs/rl-corpus`"
            )
        self.tasks, self.ctx = _corpus(
            str(self.corpus),
            r.unseen_function_frac,
            r.planner_nodes,
            tuple(r.kinds),
            r.max_function_chars,
            r.workers,
            r.localisation == "sbfl",
            progress,
        )
        if r.eval_real_corpus:  # the release-history fixes: evaluated only, as split 'real'
            real_tasks, real_ctx = load_real(r.eval_real_corpus, r, progress)
            self.tasks, self.ctx = {**self.tasks, **real_tasks}, {**self.ctx, **real_ctx}
        attach_modules(self.tasks, self.ctx, r.proposals)
        self.split: dict[str, list[str]] = {s: sorted(i for i, c in self.ctx.items() if c.split == s) for s in SPLITS}
        self.left_out = self._jailed_only() if self.free else {}
        if not self.split["train"]:
            raise ValueError(f"env.repair: the corpus at {self.corpus} has no training tasks of kinds {r.kinds}")
        self._sandbox: Sandbox | None = None
        self._levels: dict[str, list[int]] = {}
        self.by_mark = r.planner_labels == "mark"  # prompts.function_labels
        self.file_style = r.prompt_style == "file"  # graph_planner.team.file_prompts
        self._files: dict[tuple[str, str], str] = {}

    def _jailed_only(self) -> dict[str, int]:
        """Free decoding: every split cut to its tasks with the call jail; {split: tasks left out}, also printed."""
        left = {}
        for split, ids in self.split.items():
            kept = [i for i in ids if self.tasks[i].jail]
            if len(kept) < len(ids):
                left[split] = len(ids) - len(kept)
                print(
                    f"env.repair.decoding free: split {split} keeps {len(kept)} of {len(ids)} tasks; "
                    f"{left[split]} have no call jail, and text a model wrote is judged only there",
                    flush=True,
                )
            self.split[split] = kept
        if not self.split["train"]:
            raise ValueError(
                f"env.repair.decoding 'free': no training task of {self.corpus} has the call jail, and text a "
                f"model wrote is judged only there; {HOW_TO_JAIL}"
            )
        return left

    @property
    def sandbox(self) -> Sandbox:
        """The test-running slots (created on first use: planning never needs them)."""
        if self._sandbox is None:
            self._sandbox = _sandbox(
                str(self.corpus / "results-cache.jsonl"),
                self.r.workers,
                self.r.test_cpu_s,
                str(self.cfg.run_dir() / "repair-telemetry"),
            )
        return self._sandbox

    # --- the round ---

    def sample_tasks(self, round_idx: int) -> list[dict]:
        """tasks_per_round distinct training tasks, deterministic in (seed, round)."""
        rng = random.Random(f"{self.cfg.seed}:repair:{round_idx}")
        ids = rng.sample(self.split["train"], min(self.cfg.env.tasks_per_round, len(self.split["train"])))
        return [{"task_id": i} for i in ids]

    def plan(self, batch: list[dict], planner, seed: int, greedy: bool = False) -> list[list[dict]]:
        """G episodes per task: read turns, then a Repair plan naming the target function."""
        G = 1 if greedy else self.cfg.planner.group_size
        temp = 0.0 if greedy else None
        eps = [[{"task_id": t["task_id"], "read": [], "turns": [], "target": ""} for _ in range(G)] for t in batch]
        for turn in range(self.r.planner_reads + 1):
            live = [e for group in eps for e in group if not e["target"]]
            if not live:
                break
            reqs, opts = [], []
            for e in live:
                ctx = self.ctx[e["task_id"]]
                left = min(self.r.planner_reads - len(e["read"]), len(ctx.nodes) - len(e["read"]))
                levels = self.edit_levels(e["task_id"])
                if self.file_style:
                    options = file_prompts.planner_choices(ctx, e["read"], left)
                    obs = file_prompts.planner_question(ctx, e["read"], levels)
                else:
                    options = prompts.planner_options(ctx, e["read"], left, levels, self.by_mark)
                    obs = prompts.planner_observation(ctx, e["read"], levels, self.by_mark)
                reqs.append((obs, [o[0] for o in options]))
                opts.append(options)
            if turn == 0:  # every episode of a task starts from the same observation: one request, G picks
                picks = planner.choose(reqs[::G], temperature=temp, n=G, seed=seed)
                picks = [p for group in picks for p in group]
            else:
                picks = [p[0] for p in planner.choose(reqs, temperature=temp, n=1, seed=seed + turn)]
            for e, (obs, _), options, c in zip(live, reqs, opts, picks):
                _, action, node = options[c.meta["choice"]]
                e["turns"].append({"obs": obs, "completion": c})
                if action == "read":
                    e["read"].append(node)
                else:
                    e["target"] = node
        return eps

    def edit_levels(self, task_id: str) -> list[int] | None:
        """prompts.edit_level of every offered function (None unless mark_editable_trace)."""
        if not self.r.mark_editable_trace:
            return None
        if task_id not in self._levels:  # candidates parse the function: computed once per task
            self._levels[task_id] = [prompts.edit_level(v) for v in self.ctx[task_id].nodes]
        return self._levels[task_id]

    def teacher(self, ctx) -> list[tuple[str, str]]:
        """The imperfect teacher's planner episode on one task: (prompt, answer) per turn."""
        levels = self.edit_levels(ctx.instance_id)
        if self.file_style:
            return file_prompts.teacher_answers(ctx, prompts.teacher_index(self.r.teacher, levels), levels)
        return prompts.teacher_trajectory(ctx, self.r.teacher, levels, self.by_mark)

    def file_text(self, task_id: str, path: str) -> str:
        """A module of the task's repository as the bug left it (read once per task and file)."""
        key = (task_id, path)
        if key not in self._files:
            task = self.tasks[task_id]
            try:
                self._files[key] = git(task.repo_dir, "show", f"{task.base_commit}:{path}", strip=False)
            except RuntimeError:
                self._files[key] = ""  # the view's own text is then all the context there is
        return self._files[key]

    def actor_request(self, task_id: str, view) -> tuple[str, list[str]] | str:
        """The patch model's prompt and options for one target function, in the configured style (free
        decoding: the prompt alone)."""
        if self.free:
            return free.actor_prompt(self, task_id, view)
        if self.file_style:
            context = file_prompts.file_context(
                self.file_text(task_id, view.file), view.first_line, self.r.context_chars
            )
            return context, file_prompts.edited_functions(view)[0]
        return prompts.actor_prompt(self.ctx[task_id], view), prompts.actor_options(view, self.r.actor_marks)[0]

    def _view(self, task_id: str, target: str):
        ctx = self.ctx[task_id]
        return next((v for v in ctx.nodes if v.node == target), ctx.nodes[0])

    def actor_requests(self, batch: list[dict], plans) -> list[tuple[str, list[str]] | str]:
        """The plan's target function and its candidate edits (free decoding: its prompt); without plans,
        the top-ranked function."""
        out = []
        for ti, t in enumerate(batch):
            targets = [p["target"] for p in plans[ti]] if plans is not None else [""]
            for target in targets:
                out.append(self.actor_request(t["task_id"], self._view(t["task_id"], target)))
        return out

    def score(self, batch: list[dict], plans, answers, n_rollouts: int = 0) -> RoundResult:
        """Run every chosen edit's failing tests; credit the actor per edit, the planner per turn (GiGPO)."""
        res, m = RoundResult(), {}
        G = len(plans[0]) if plans is not None else 1
        targets = [[p["target"] for p in plans[ti]] if plans is not None else [""] for ti in range(len(batch))]
        jobs, where, malformed = [], [], 0
        for ti, t in enumerate(batch):
            for gi in range(G):
                view, group = self._view(t["task_id"], targets[ti][gi]), answers[ti * G + gi]
                if self.free:  # a malformed reply is no job: its reward is 0
                    edits = free.edits(self, t["task_id"], view, [a.text for a in group])
                    malformed += sum(e is None for e in edits)
                else:
                    _, cands = prompts.actor_options(view)
                    edits = [cands[a.meta["choice"]].edit for a in group]
                for ki, edit in enumerate(edits):
                    if edit is not None:
                        jobs.append((self.tasks[t["task_id"]], edit))
                        where.append((ti, gi, ki))
        before = dict(self.sandbox.stats)
        # a free reply is model text; a chosen candidate is an edit planact enumerated from the task's source
        verdicts = dict(zip(where, self.sandbox.judge_many(jobs, "train", MODEL if self.free else MENU)))
        steps, returns, plan_samples = [], {}, []
        outcomes, plan_rewards, correct, no_cands, signal = [], [], [], 0, []
        for ti, t in enumerate(batch):
            tid, task_returns = t["task_id"], []
            for gi in range(G):
                group = answers[ti * G + gi]
                rewards = [float(verdicts.get((ti, gi, ki), {}).get("resolved", False)) for ki in range(len(group))]
                signal.append(float(len(set(rewards)) > 1))
                no_cands += not group
                adv = group_advantages(rewards, self.cfg.actor.rl.std_normalize) if rewards else []
                res.actor_samples.extend(
                    sample_record(a, r, ad, "actor", tid, f"{tid}/{gi}") for a, r, ad in zip(group, rewards, adv)
                )
                outcomes.extend(rewards)
                ret = sum(rewards) / len(rewards) if rewards else 0.0
                task_returns.append(ret)
                if plans is not None:
                    ep = plans[ti][gi]
                    correct.append(float(ep["target"] == self.ctx[tid].target))
                    returns[f"{tid}/{gi}"] = ret
                    for k, turn in enumerate(ep["turns"]):
                        last = k == len(ep["turns"]) - 1
                        steps.append(
                            {
                                "episode": f"{tid}/{gi}",
                                "group": tid,
                                "t": k,
                                "reward": ret if last else 0.0,
                                "anchor": turn["obs"],
                            }
                        )
                        plan_samples.append((turn["completion"], ret, tid))
                if len(res.rollouts) < n_rollouts and group:
                    res.rollouts.append(
                        {
                            "task": tid,
                            "target": targets[ti][gi] or "(fallback)",
                            "edit": group[0].text,
                            "true_function": self.ctx[tid].target,
                            "outcome": rewards[0],
                        }
                    )
            plan_rewards.extend(task_returns)
        if plans is not None:
            adv = gigpo_advantages(
                steps, returns, self.r.gigpo_gamma, self.r.gigpo_step_weight, self.cfg.planner.rl.std_normalize
            )
            res.planner_samples = [
                sample_record(c, r, a, "planner", tid, tid) for (c, r, tid), a in zip(plan_samples, adv)
            ]
            m["planner/reward_mean"] = _mean(plan_rewards)
            m["planner/target_correct"] = _mean(correct)
            # A planner imitating its teacher to certainty names one target per task and RL has nothing to
            # compare: the share of tasks whose G episodes disagree is what the planner's GiGPO learns from.
            m["planner/groups_with_choice"] = _mean(
                [float(len({p["target"] for p in plans[ti]}) > 1) for ti in range(len(batch))]
            )
            m["planner/steps_per_episode"] = len(steps) / max(1, len(returns))
            m["planner/malformed"] = 0.0  # constrained choice: every pick is a valid action
        m["success"] = m["actor/reward_mean"] = _mean(outcomes)
        # candidates: plans whose target has no candidate edit; free: replies that are no edit (free_edit)
        m["actor/malformed"] = float(malformed if self.free else no_cands)
        m["actor/refused"] = float(sum(v["refused"] for v in verdicts.values()))  # edits the patch check refused
        m["actor/groups_with_signal"] = _mean(signal)
        after = self.sandbox.stats
        runs, hits = after["test_runs"] - before["test_runs"], after["cache_hits"] - before["cache_hits"]
        m["sandbox/test_runs"], m["sandbox/cache_hits"] = float(runs), float(hits)
        m["sandbox/cache_hit_rate"] = hits / max(1, runs + hits)
        m["sandbox/refused"] = float(after["refused"] - before["refused"])
        m["sandbox/tampering"] = float(after["tampering"] - before["tampering"])  # voided verdicts, each scored 0
        # model text on a task without the call jail, scored 0 unrun (free decoding keeps such tasks out: 0)
        m["sandbox/unjudged"] = float(after["unjudged"] - before["unjudged"])
        m["time/sandbox_s"] = after["seconds"] - before["seconds"]
        res.metrics = m
        return res

    # --- warm start, evaluation, tokenizer ---

    def demonstrations(self, role: str, count: int, rng: random.Random) -> list[tuple[str, str]]:
        """The warm start's (prompt, answer) pairs for `role` (graph_planner.team.demos)."""
        return demos.demonstrations(self, role, count, rng)

    def traced_fraction(self) -> float:
        """How often a training bug's line is on its failing tests' traceback (when its function is offered)."""
        return demos.traced_fraction(self)

    def evaluate(self, planner, actor, progress: ProgressFn | None = None) -> dict[str, float]:
        """Solve rates at test budgets 1..eval_budget on unseen functions and unseen packages: the team
        (greedy planner, actor's ranking), the rule agent and a random candidate, same budgets."""
        return evaluate_team(self, planner, actor, progress)

    def tokenizer_texts(self) -> list[str]:
        """The training packages' code, the standard-library modules of the warm start, and teacher prompts."""
        texts = [t for _, _, t in demos.sft_sources(self)] + [
            t for _, t in prompts.stdlib_files(self.r.sft_extra_sources)
        ]
        train = [self.ctx[i] for i in self.split["train"]]
        return texts + [p + t for ctx in train for p, t in self.teacher(ctx)]


def _mean(xs) -> float:
    xs = list(xs)
    return sum(xs) / len(xs) if xs else 0.0


__all__ = ["RepairTeamEnv"]
