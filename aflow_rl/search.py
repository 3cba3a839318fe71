"""AFlow's MCTS over workflows, round by round, with optional GiGPO policy guidance.

    round 1: the initial workflow, evaluated
    round r: select a parent (round 1 + top rounds, soft mixed probability on x100 scores)
             -> expand (optimizer; policy picks the edit) -> validate -> evaluate N times
             -> record experience (experience.json, processed_experience.json, results.json)
             -> train the policy -> convergence check (top-k average unchanged for `patience` rounds)

Each stage is a method, so the Prefect flow can run one task per stage and fan evaluation out over
Ray, while `run_local` runs the same stages in one process (benchmarks, tests). All state lives in
the workspace folder: a run restarted on it continues after the last finished round, re-evaluating
only a round that was interrupted mid-evaluation. Randomness is drawn per round from (seed, round),
so a resumed run makes the choices the uninterrupted one would have made.
"""

from __future__ import annotations

import math
import random
import time
from pathlib import Path

from aflow_rl import space
from aflow_rl.benchmarks import CODE_BENCHMARKS, load_problems, split
from aflow_rl.config import AFlowConfig
from aflow_rl.evaluator import evaluate_local, summarise, write_round_evaluation
from aflow_rl.llm import LLMHandle
from aflow_rl.optimizers import Candidate, LLMOptimizer, StructuredOptimizer, accepted
from aflow_rl.policy import EditPolicy, WorkflowState
from aflow_rl.workflow import read_round, validate
from aflow_rl.workspace import Workspace


def selection_probabilities(scores: list[float], alpha: float, lam: float) -> list[float]:
    """AFlow: P_i = lam/n + (1-lam) * softmax(alpha * (100*s_i - 100*s_max))."""
    n = len(scores)
    scaled = [100.0 * s for s in scores]
    top = max(scaled)
    w = [math.exp(alpha * (s - top)) for s in scaled]
    z = sum(w)
    return [lam / n + (1 - lam) * x / z for x in w]


def top_k_average(scores: dict[int, float], k: int) -> float:
    """Mean of the k best round scores."""
    best = sorted(scores.values(), reverse=True)[:k]
    return sum(best) / len(best) if best else 0.0


class Search:
    """The state and stages of one optimisation, backed by its AFlow workspace."""

    def __init__(self, cfg: AFlowConfig):
        self.cfg = cfg
        self.ws = Workspace(cfg.workspace_dir())
        self.family = space.FAMILIES[cfg.benchmark]
        problems = load_problems(cfg.benchmark, cfg.data_path, cfg.problems, seed=42)
        self.validation, self.test = split(problems, seed=42)
        if cfg.limit:
            self.validation = self.validation[: cfg.limit]
        self.llm = LLMHandle(
            cfg.executor, str(Path(cfg.root).resolve()), benchmark=cfg.benchmark, data_path=cfg.data_path
        )
        self.policy = EditPolicy(self.family, cfg.policy.lr, cfg.seed) if cfg.policy.enabled else None
        self.policy_path = cfg.run_dir() / "policy.pt"
        if self.policy is not None:
            self.policy.load(self.policy_path)
        self.optimizer = (
            LLMOptimizer(
                cfg.search.optimizer_llm,
                cfg.benchmark,
                cfg.search.optimizer_attempts,
                cfg.search.failure_logs,
                cfg.search.max_operator_calls,
            )
            if cfg.search.optimizer == "llm"
            else StructuredOptimizer(cfg.benchmark)
        )
        self.code_limits = {
            "timeout_s": cfg.code_timeout_s,
            "memory_mb": cfg.code_memory_mb,
            "memo": cfg.executor.kind == "planact" and cfg.benchmark in CODE_BENCHMARKS,
        }

    # --- where are we ---

    def bootstrap(self) -> int:
        """Create the workspace (round 1 = the initial workflow) if needed; return the next round to run."""
        self.ws.init()
        if not self.ws.rounds_on_disk():
            graph, prompt = space.render(space.initial_spec(self.cfg.benchmark))
            self.ws.write_round(1, graph, prompt, {"parent": None, "modification": "initial workflow"})
        return self.next_round()

    def next_round(self) -> int:
        """The first round not finished (1 when round 1 still needs evaluating)."""
        r = 1
        while self.ws.finished(r):
            r += 1
        return r

    def pending_candidate(self, r: int) -> Candidate | None:
        """A round written before an interruption but not finished: evaluate it as it is, do not regenerate."""
        if r not in self.ws.rounds_on_disk():
            return None
        meta = self.ws.meta(r)
        graph, prompt = read_round(self.ws.round_dir(r))
        self.ws.clear_evaluation(r)
        return Candidate(
            meta.get("parent") or 0,
            graph,
            prompt,
            meta.get("modification", ""),
            meta.get("edit"),
            meta.get("allowed", []),
            meta.get("features", []),
            prob=meta.get("prob"),
        )

    # --- select ---

    def candidates(self) -> list[tuple[int, float]]:
        """Round 1 plus the best rounds, `search.candidates` in all (AFlow's get_top_rounds)."""
        scores = self.ws.scores()
        ranked = sorted(scores.items(), key=lambda kv: -kv[1])
        top = [(1, scores[1])] if 1 in scores else []
        top += [kv for kv in ranked if kv[0] != 1][: self.cfg.search.candidates - len(top)]
        return top

    def selection(self) -> list[tuple[int, float, float]]:
        """(round, score, probability) for every candidate parent; the policy re-weights when enabled."""
        cands = self.candidates()
        probs = selection_probabilities([s for _, s in cands], self.cfg.search.alpha, self.cfg.search.lam)
        if self.policy is not None and isinstance(self.optimizer, StructuredOptimizer):
            probs = [
                p * math.exp(self.cfg.policy.selection_beta * (self._promise(r, s) - 1.0))
                for (r, s), p in zip(cands, probs)
            ]
            z = sum(probs)
            probs = [p / z for p in probs] if z > 0 else probs
        return [(r, s, p) for (r, s), p in zip(cands, probs)]

    def _promise(self, r: int, score: float) -> float:
        """How much of the policy's preference at this parent is still untried (1 = its favourite edit is open)."""
        graph = (self.ws.round_dir(r) / "graph.py").read_text()
        spec, _ = self.optimizer.base_spec(graph)
        all_keys = [e.key for e in space.catalogue(self.family) if space.apply(spec, e) is not None]
        existing = [
            s
            for s in (space.spec_of((self.ws.round_dir(x) / "graph.py").read_text()) for x in self.ws.rounds_on_disk())
            if s
        ]
        tried = self.ws.tried_modifications(r)
        open_keys = {
            e.key
            for e in space.catalogue(self.family)
            if (n := space.apply(spec, e)) is not None and e.describe() not in tried and n not in existing
        }
        if not all_keys or not open_keys:
            return 0.0
        p = self.policy.probs(spec, score, all_keys)
        return max(p[k] for k in open_keys) / max(p.values())

    def select(self, r: int, exclude: set[int] = frozenset(), salt: int = 0) -> tuple[int, float] | None:
        """Draw a parent for round r (deterministic in seed, round and attempt)."""
        sel = [x for x in self.selection() if x[0] not in exclude and x[2] > 0]
        if not sel:
            return None
        rng = random.Random(f"{self.cfg.seed}:select:{r}:{salt}:{len(exclude)}")
        parent = rng.choices(sel, weights=[p for _, _, p in sel])[0]
        return parent[0], parent[1]

    # --- expand ---

    def expand(self, r: int, salt: int = 0) -> Candidate | None:
        """Select a parent and ask the optimizer for a child; parents with nothing left to try are skipped."""
        rng = random.Random(f"{self.cfg.seed}:expand:{r}:{salt}")
        exclude: set[int] = set()
        last = None
        while (pick := self.select(r, exclude, salt)) is not None:
            parent, score = pick
            cand = self.propose(parent, score, rng)
            if accepted(cand):
                return cand
            last = cand or last
            exclude.add(parent)
        return last  # a refused LLM answer (counted), or None: nothing new anywhere

    def propose(self, parent: int, score: float, rng: random.Random) -> Candidate | None:
        """One child of `parent` from the optimizer (the policy picks the structured edit or the LLM's hint)."""
        if isinstance(self.optimizer, StructuredOptimizer):
            return self.optimizer.propose(self.ws, parent, score, rng, self.policy)
        hint_key, hint = self._hint(parent, score, rng)
        return self.optimizer.propose(self.ws, parent, score, rng, hint, hint_key)

    def _hint(self, parent: int, score: float, rng: random.Random) -> tuple[str | None, str | None]:
        if self.policy is None:
            return None, None
        spec = space.spec_of((self.ws.round_dir(parent) / "graph.py").read_text())
        if spec is None:
            return None, None
        keys = [e.key for e in space.catalogue(self.family) if space.apply(spec, e) is not None]
        if not keys:
            return None, None
        probs = self.policy.probs(spec, score, keys)
        key = rng.choices(keys, weights=[probs[k] for k in keys])[0]
        return key, next(e for e in space.catalogue(self.family) if e.key == key).describe()

    # --- validate, write ---

    def validate_and_write(self, r: int, cand: Candidate) -> list[str]:
        """Validate the child; write round_r when valid, else remember the refusal. Returns the errors."""
        errors = (
            validate(cand.graph, cand.prompt, self.cfg.search.max_operator_calls).errors
            if accepted(cand)
            else cand.rejected or ["optimizer produced no workflow"]
        )
        if errors:
            self.ws.record_refusal(r, cand.parent, cand.modification, errors)
        else:
            self.ws.write_round(
                r,
                cand.graph,
                cand.prompt,
                {
                    "parent": cand.parent,
                    "modification": cand.modification,
                    "edit": cand.edit,
                    "allowed": cand.allowed,
                    "features": cand.features,
                    "prob": cand.prob,
                    "optimizer_attempts": cand.attempts,
                    "rejected": cand.rejected,
                },
            )
        return errors

    # --- evaluate, record ---

    def sample_key(self, split_name: str, r: int) -> str:
        """What seeds round r's model calls on a split: the same samples locally and sharded over Ray."""
        return f"{self.cfg.seed}:{split_name}:{r}"

    def evaluate_here(self, r: int, problems: list[dict] | None = None) -> list[list[dict]]:
        """All validation repeats of round r in this process."""
        graph, prompt = read_round(self.ws.round_dir(r))
        return evaluate_local(
            graph,
            prompt,
            problems or self.validation,
            self.cfg.benchmark,
            self.llm,
            self.cfg.search.validation_repeats,
            self.cfg.concurrency,
            self.code_limits,
            self.sample_key("validation", r),
        )

    def record(self, r: int, repeats: list[list[dict]], seconds: float) -> dict:
        """Write CSVs, log.json, results rows and (after round 1) the experience; return the round's figures."""
        summary = summarise(repeats)
        rows = write_round_evaluation(self.ws.round_dir(r), r, self.validation, repeats, seconds)
        self.ws.append_results(rows)
        meta = self.ws.meta(r)
        out = {
            "round": r,
            "score": summary["score"],
            "std": summary["std"],
            "total_cost": summary["total_cost"],
            "errors": summary["errors"],
            "parse_failures": summary["parse_failures"],
            "parent": meta.get("parent"),
            "modification": meta.get("modification", ""),
        }
        if r > 1 and meta.get("parent") is not None:
            before = self.ws.scores()[meta["parent"]]
            exp = self.ws.record_experience(r, meta["parent"], meta.get("modification", ""), before, summary["score"])
            out.update({"before": before, "reward": summary["score"] - before, "succeed": exp["succeed"]})
        return out

    def experience_steps(self, episode: str) -> list[dict]:
        """This run's expansions as GiGPO steps (state features, action, allowed actions, reward, anchor)."""
        steps = []
        scores = self.ws.scores()
        for r in self.ws.rounds_on_disk():
            meta, exp = self.ws.meta(r), self.ws.experience(r)
            if not exp or not meta.get("edit") or not meta.get("features"):
                continue
            parent = meta["parent"]
            state = WorkflowState(*read_round(self.ws.round_dir(parent)), None, [scores.get(parent, 0.0)])
            steps.append(
                {
                    "episode": episode,
                    "group": self.cfg.benchmark,
                    "t": r,
                    "parent": parent,
                    "reward": exp["after"] - exp["before"],
                    "anchor": state.key,
                    "features": meta["features"],
                    "action": meta["edit"],
                    "allowed": meta.get("allowed") or [meta["edit"]],
                    "prob": meta.get("prob"),
                }
            )
        return steps

    def train_policy(
        self, other_steps: list[dict] | None = None, other_returns: dict[str, float] | None = None
    ) -> dict:
        """GiGPO on this run's expansions (plus other runs' from the experience pool); saves the policy."""
        if self.policy is None:
            return {}
        episode = self.cfg.run_name
        steps = self.experience_steps(episode) + list(other_steps or [])
        scores = self.ws.scores()
        returns = {episode: max(scores.values()) - scores.get(1, 0.0) if scores else 0.0, **(other_returns or {})}
        p = self.cfg.policy
        metrics = self.policy.train(
            steps, returns, p.gamma, p.step_weight, p.epochs, p.entropy_coef, p.clip, p.window_rounds
        )
        self.policy_path.parent.mkdir(parents=True, exist_ok=True)
        self.policy.save(self.policy_path)
        return metrics

    def acceptance_rate(self) -> float:
        """Share of optimizer proposals that passed validation (1.0 before any proposal)."""
        written = len([r for r in self.ws.rounds_on_disk() if r > 1])
        refused = len(self.ws.refusals())
        return written / (written + refused) if written + refused else 1.0

    def converged(self) -> bool:
        """Top-k average unchanged for `patience` consecutive rounds (AFlow's stopping rule with z = 0)."""
        scores = self.ws.scores()
        rounds = sorted(scores)
        k, patience = self.cfg.search.top_k, self.cfg.search.patience
        if len(rounds) <= patience:
            return False
        history = [top_k_average({r: scores[r] for r in rounds[: i + 1]}, k) for i in range(len(rounds))]
        return all(abs(history[-1] - h) < 1e-12 for h in history[-patience - 1 :])

    def best(self) -> tuple[int, float]:
        """The best round and its validation score."""
        scores = self.ws.scores()
        r = max(scores, key=lambda x: (scores[x], -x))
        return r, scores[r]

    def test_score(self, r: int, repeats: int = 1) -> float:
        """Held-out test score of round r (the 4/5 of the problems never used for selection)."""
        reps = evaluate_local(
            *read_round(self.ws.round_dir(r)),
            self.test,
            self.cfg.benchmark,
            self.llm,
            repeats,
            self.cfg.concurrency,
            self.code_limits,
            self.sample_key("test", r),
        )
        return summarise(reps)["score"]


def run_local(
    cfg: AFlowConfig, log=print, other_steps: list[dict] | None = None, other_returns: dict[str, float] | None = None
) -> list[dict]:
    """The whole search in this process (no Prefect, no Ray): what benchmarks/aflow_rl_vs_mcts.py runs.

    other_steps / other_returns: earlier runs' expansions (GiGPO episodes of the same group) for the policy.
    """
    s = Search(cfg)
    history: list[dict] = []
    r = s.bootstrap()
    refusals = 0
    while r <= cfg.search.max_rounds and refusals <= cfg.search.max_rounds:
        t0 = time.perf_counter()
        if r > 1:
            cand = s.pending_candidate(r) or s.expand(r, salt=refusals)
            if cand is None:
                log(f"round {r}: nothing left to try from any candidate parent; stopping")
                break
            errors = s.validate_and_write(r, cand) if r not in s.ws.rounds_on_disk() else []
            if errors:
                refusals += 1
                log(f"round {r}: optimizer output refused ({'; '.join(errors)[:200]})")
                continue
        out = s.record(r, s.evaluate_here(r), time.perf_counter() - t0)
        out.update(s.train_policy(other_steps, other_returns) if r > 1 else {})
        history.append({**out, "best": s.best()[1], "acceptance_rate": s.acceptance_rate()})
        log(
            f"round {r}: score {out['score']:.3f} ±{out['std']:.3f}  best {s.best()[1]:.3f}  "
            f"{out.get('modification', '')}"
        )
        if s.converged():
            log(f"converged after round {r}")
            break
        r = s.next_round()
    return history
