"""AFlow search as an RL environment for the optimizer model: an episode is one search, a step one expansion.

    env = WorkflowEnv(cfg)
    obs = env.reset("planact", seed=3)          # round 1 (the initial workflow) evaluated, a parent selected
    obs, reward, done, info = env.step(answer)  # the optimizer's answer -> a child of obs.parent, evaluated

What the optimizer writes (`cfg.search.optimizer`): with "structured" (tiny local models) one edit of
the structured space as a short line (`edit_text`: "add plan", "votes act 3", "template ACT_PROMPT 1");
with "llm" (real models) AFlow's full `<modification>/<graph>/<prompt>` answer. Output that does not
parse, names an edit that does not apply, repeats a tried modification or fails validation is an
observation and a 0 reward: counted in `info["invalid"]`, kept as a refusal in the workspace, the step
spent, never raised. Reward: the child's validation score minus its parent's; the episode's last step
also earns the best score over the initial workflow's (the search's outcome). Each search keeps AFlow's
on-disk layout (round_N/graph.py, prompt.py, CSVs, experience.json, results.json), so a reader of AFlow
workspaces opens it and a restarted environment continues after the last finished round.
"""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import dataclass, field

from aflow_rl import space
from aflow_rl.config import AFlowConfig
from aflow_rl.optimizers import Candidate, LLMOptimizer, open_edits
from aflow_rl.search import Search
from aflow_rl.workflow import read_round, validate

_EDIT_WORDS = {"add": 2, "remove": 2, "votes": 3, "op": 3, "template": 3}


def edit_text(edit: space.Edit) -> str:
    """The one-line form a tiny optimizer writes: 'add plan', 'votes act 3', 'template ACT_PROMPT 1'."""
    return " ".join(str(x) for x in (edit.kind, edit.target, edit.value) if x is not None)


def parse_edit(text: str, family: str) -> space.Edit | None:
    """The catalogue edit a line names (first line, surrounding blanks ignored), or None."""
    line = (text or "").strip().splitlines()[0].strip() if (text or "").strip() else ""
    words = line.split()
    if not words or _EDIT_WORDS.get(words[0]) != len(words):
        return None
    return next((e for e in space.catalogue(family) if edit_text(e) == " ".join(words)), None)


@dataclass
class Observation:
    """What the optimizer sees before one expansion: the parent workflow and what was tried from it."""

    benchmark: str
    round: int  # the round this step will write
    parent: int
    score: float  # the parent's mean validation score
    graph: str
    prompt: str
    experience: list[str]  # AFlow's processed experience of the parent: "+0.0400 Add a plan step." per try
    allowed: list[str] = field(default_factory=list)  # edit lines still open at the parent (structured space)

    @property
    def anchor(self) -> str:
        """GiGPO's step-level anchor: the same parent workflow in any search of the benchmark."""
        spec = space.spec_of(self.graph)
        body = json.dumps(spec, sort_keys=True) if spec is not None else self.graph + "\0" + self.prompt
        return hashlib.sha1(f"{self.benchmark}\0{body}".encode()).hexdigest()[:16]

    def text(self) -> str:
        """The prompt of a tiny optimizer: the parent's structure, score, tries and the open edits."""
        spec = space.spec_of(self.graph)
        if spec is None:
            shape = "outside the structured space"
        else:
            steps = " ".join(f"{s['kind']}x{s['votes']}{'/' + s['op'] if s['op'] else ''}" for s in spec["steps"])
            shape = f"{steps} | " + " ".join(f"{k}={v}" for k, v in sorted(spec["templates"].items()))
        tried = "; ".join(self.experience) or "none"
        return (
            f"benchmark {self.benchmark} | workflow {shape} | score {self.score:.2f} | tried {tried} | "
            f"open {', '.join(self.allowed) or 'none'} | edit:"
        )


class WorkflowEnv:
    """One AFlow search at a time, driven step by step by an optimizer's answers."""

    def __init__(self, cfg: AFlowConfig, max_steps: int | None = None):
        self.base = cfg
        # Invalid answers spend steps without writing rounds: bounded so that an episode always ends.
        self.max_steps = max_steps or 2 * cfg.search.max_rounds
        self.free_form = cfg.search.optimizer == "llm"  # AFlow's <modification>/<graph>/<prompt> answers
        self.search: Search | None = None
        self.obs: Observation | None = None
        self.steps = self.invalid = 0

    # --- episode ---

    def reset(self, benchmark: str | None = None, seed: int | None = None) -> Observation:
        """Start (or continue) the search of `benchmark` with `seed`; round 1 is evaluated before returning."""
        benchmark = benchmark or self.base.benchmark
        seed = self.base.seed if seed is None else seed
        name = f"{self.base.run_name}-{benchmark}-s{seed}"
        cfg = self.base.model_copy(
            update={
                "benchmark": benchmark,
                "seed": seed,
                "run_name": name,
                "workspace": str(self.base.run_dir() / "searches" / f"{benchmark}-s{seed}" / "workflows"),
                "policy": self.base.policy.model_copy(update={"enabled": False}),  # the optimizer is the policy here
                # The answers come from outside: the search never calls an optimizer model of its own.
                "search": self.base.search.model_copy(update={"optimizer": "structured"}),
                "optimizer_rl": self.base.optimizer_rl.model_copy(update={"model_path": None}),
            }
        )
        self.search = Search(AFlowConfig.model_validate(cfg.model_dump()))
        r = self.search.bootstrap()
        if r == 1:
            self._evaluate(1)
        elif r in self.search.ws.rounds_on_disk():  # interrupted mid-evaluation: finish that round as written
            self.search.pending_candidate(r)
            self._evaluate(r)
        self.steps = len(self.search.ws.refusals()) + len(self.search.ws.rounds_on_disk()) - 1
        self.invalid = len(self.search.ws.refusals())
        self.obs = self._observe()
        return self.obs

    def step(self, answer: str) -> tuple[Observation, float, bool, dict]:
        """Turn the optimizer's answer into a child of the observed parent, evaluate it, and score the step."""
        if self.search is None or self.obs is None:
            raise RuntimeError("WorkflowEnv.step before reset")
        if self.done:
            raise RuntimeError("WorkflowEnv.step after the episode ended; call reset")
        obs, s = self.obs, self.search
        self.steps += 1
        cand, errors = self._candidate(obs, answer)
        if not errors:
            errors = s.validate_and_write(obs.round, cand)
        else:
            s.ws.record_refusal(obs.round, obs.parent, cand.modification if cand else "", errors)
        info: dict = {"round": obs.round, "parent": obs.parent, "invalid": bool(errors), "errors": errors}
        if errors:
            self.invalid += 1
            reward = 0.0
        else:
            child = self._evaluate(obs.round)
            reward = child["score"] - obs.score
            info.update(score=child["score"], modification=cand.modification)
        done = self.done
        if done:  # the search's outcome, paid once at its end
            scores = s.ws.scores()
            info["best"] = max(scores.values())
            info["outcome"] = info["best"] - scores[1]
            reward += info["outcome"]
        self.obs = obs if done else self._observe()
        return self.obs, reward, done, info

    @property
    def done(self) -> bool:
        """Round budget spent, AFlow's convergence rule met, step budget spent, or nothing left to try."""
        s = self.search
        return s is not None and (
            s.next_round() > self.base.search.max_rounds
            or self.steps >= self.max_steps
            or s.converged()
            or (self.obs is not None and self.obs.parent < 0)
        )

    # --- stages ---

    def _candidate(self, obs: Observation, answer: str) -> tuple[Candidate | None, list[str]]:
        """The child the answer describes, or the reasons it is not one."""
        s = self.search
        tried = s.ws.tried_modifications(obs.parent)
        if not self.free_form:
            edit = parse_edit(answer, s.family)
            if edit is None:
                return None, [f"not an edit line: {str(answer)[:80]!r}"]
            if edit_text(edit) not in obs.allowed:
                return None, [f"edit {edit_text(edit)!r} is not open at round {obs.parent}"]
            spec, prefix = s.optimizer.base_spec(obs.graph)
            graph, prompt = space.render(space.apply(spec, edit))
            return Candidate(obs.parent, graph, prompt, prefix + edit.describe(), edit.key, obs.allowed), []
        modification, graph, prompt, problems = LLMOptimizer.repair(answer or "", obs.prompt)
        if not problems:
            problems = validate(graph, prompt, self.base.search.max_operator_calls).errors
        if not problems and modification in tried:
            problems = [f"modification already tried from round {obs.parent}: {modification!r}"]
        cand = Candidate(obs.parent, graph or "", prompt or "", modification or "")
        return cand, problems

    def _evaluate(self, r: int) -> dict:
        t0 = time.perf_counter()
        return self.search.record(r, self.search.evaluate_here(r), time.perf_counter() - t0)

    def _observe(self) -> Observation:
        """AFlow's parent selection for the next round, and what the optimizer is shown of that parent."""
        s = self.search
        r = s.next_round()
        structured = not self.free_form
        pick, exclude, allowed = None, set(), []
        while (sel := s.select(r, exclude, salt=self.steps)) is not None:
            if not structured:
                pick = sel
                break
            allowed = self._open(sel[0])
            if allowed:  # a parent with nothing left to try is skipped, as AFlow's expansion does
                pick = sel
                break
            exclude.add(sel[0])
        parent, score = pick if pick else (-1, 0.0)  # -1: nothing left anywhere (the episode is done)
        graph, prompt = read_round(s.ws.round_dir(parent)) if parent > 0 else ("", "")
        node = s.ws.processed_experience().get(str(parent), {})
        tries = [
            f"{v['score'] - score:+.4f} {v['modification']}"
            for b in ("success", "failure")
            for v in node.get(b, {}).values()
        ]
        return Observation(s.cfg.benchmark, r, parent, score, graph, prompt, tries, allowed)

    def _open(self, parent: int) -> list[str]:
        s = self.search
        spec, prefix = s.optimizer.base_spec((s.ws.round_dir(parent) / "graph.py").read_text())
        existing = [
            x for x in (space.spec_of((s.ws.round_dir(q) / "graph.py").read_text()) for q in s.ws.rounds_on_disk()) if x
        ]
        tried = {m.removeprefix(prefix) for m in s.ws.tried_modifications(parent)}
        return [edit_text(e) for e in open_edits(s.ws, parent, spec, existing, tried)]


def step_advantages(transitions: list[dict], gamma: float, step_weight: float) -> list[float]:
    """GiGPO advantages of transitions gathered from parallel searches.

    Each transition has `search` (episode id), `benchmark` (episode group: searches of one benchmark are
    compared), `t` (its step), `reward`, `anchor` (Observation.anchor: the same parent workflow in two
    searches is one anchor state) and, on an episode's last step, `outcome` (best over initial).
    """
    from planact.rl.gigpo import gigpo_advantages

    returns: dict[str, float] = {}
    for tr in transitions:  # an episode's return: its rewards (the last one carries the outcome)
        returns[tr["search"]] = returns.get(tr["search"], 0.0) + tr["reward"]
    steps = [
        {
            "episode": tr["search"],
            "group": tr["benchmark"],
            "t": tr["t"],
            "reward": tr["reward"],
            "anchor": tr["anchor"],
        }
        for tr in transitions
    ]
    return gigpo_advantages(steps, returns, gamma, step_weight)
