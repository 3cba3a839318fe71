"""The edit policy: WorkflowState features -> a distribution over structured edits, trained with GiGPO.

State = the parent workflow (its spec, i.e. graph + prompt choices) and its score; action = one edit
from the family's catalogue; reward = the child's validation score minus the parent's. GiGPO as
defined: an episode is a search run, and the runs over one benchmark form the episode group (a run
alone in its group gets no episode-level advantage, so its edits are never all reinforced); a step's
return follows the search tree (the step's reward plus the discounted mean return of the expansions
made from the node it created), never the round order; anchor groups are expansions of the identical
parent state, so sibling edits compete. Updates are PPO-clipped against the probability the sampling
policy gave the edit, over a window of each run's latest rounds. The policy chooses the edit (or the
hint handed to the LLM optimizer) and biases parent selection toward parents whose favourite edits
are still untried.
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass
from pathlib import Path

import torch

from aflow_rl.space import OPTIONAL, REPLACEABLE, TEMPLATES, VOTED, VOTES, Edit, catalogue
from planact.rl.gigpo import gigpo_advantages, tree_returns


@dataclass
class WorkflowState:
    """The anchor state of an expansion: the parent's graph, prompt and score history."""

    graph: str
    prompt: str
    spec: dict | None
    scores: list[float]

    @property
    def key(self) -> str:
        """Identical parents (same graph and prompt) share this key: GiGPO's anchor."""
        return hashlib.sha1((self.graph + "\0" + self.prompt).encode()).hexdigest()[:16]

    @property
    def score(self) -> float:
        """Mean validation score of the parent."""
        return sum(self.scores) / len(self.scores) if self.scores else 0.0


def features(family: str, spec: dict | None, score: float) -> list[float]:
    """A fixed-length description of a state: which steps, ensemble sizes, operators, templates, its score."""
    f: list[float] = [1.0, score]
    steps = {s["kind"]: s for s in (spec or {}).get("steps", [])}
    f += [float(k in steps) for k in OPTIONAL[family]]
    for k in VOTED[family]:
        f += [float(k in steps and steps[k]["votes"] == v) for v in VOTES]
    if family in REPLACEABLE:
        step, ops = REPLACEABLE[family]
        f += [float(step in steps and steps[step]["op"] == o) for o in ops]
    for name, bank in TEMPLATES[family].items():
        chosen = (spec or {}).get("templates", {}).get(name, -1)
        f += [float(chosen == i) for i in range(len(bank))]
    return f


class EditPolicy:
    """Softmax over the catalogue from a linear map of the state features."""

    def __init__(self, family: str, lr: float = 0.05, seed: int = 0):
        self.family = family
        self.edits: list[Edit] = catalogue(family)
        self.index = {e.key: i for i, e in enumerate(self.edits)}
        torch.manual_seed(seed)
        n_in = len(features(family, None, 0.0))
        self.net = torch.nn.Linear(n_in, len(self.edits))
        torch.nn.init.zeros_(self.net.weight)
        torch.nn.init.zeros_(self.net.bias)  # starts uniform: an untrained policy is plain random edits
        self.opt = torch.optim.Adam(self.net.parameters(), lr=lr)
        self.updates = 0

    def probs(self, spec: dict | None, score: float, allowed: list[str]) -> dict[str, float]:
        """pi(edit | state) over the allowed edit keys."""
        if not allowed:
            return {}
        with torch.no_grad():
            logits = self.net(torch.tensor(features(self.family, spec, score)))
        idx = torch.tensor([self.index[k] for k in allowed])
        p = torch.softmax(logits[idx], -1).tolist()
        return dict(zip(allowed, p))

    def advantages(
        self,
        steps: list[dict],
        episode_returns: dict[str, float],
        gamma: float,
        step_weight: float,
        window: int | None = None,
    ) -> tuple[list[dict], list[float]]:
        """GiGPO advantages of the steps in each run's latest `window` rounds (tree returns use every step)."""
        steps = [dict(s) for s in steps if s["action"] in self.index]
        for s, r in zip(steps, tree_returns(steps, gamma)):
            s["return"] = r
        if window:
            last = {}
            for s in steps:
                last[s["episode"]] = max(last.get(s["episode"], 0), s["t"])
            steps = [s for s in steps if s["t"] > last[s["episode"]] - window]
        return steps, gigpo_advantages(steps, episode_returns, gamma, step_weight)

    def train(
        self,
        steps: list[dict],
        episode_returns: dict[str, float],
        gamma: float,
        step_weight: float,
        epochs: int,
        entropy_coef: float,
        clip: float = 0.2,
        window: int | None = None,
    ) -> dict[str, float]:
        """PPO-clipped GiGPO steps on recorded expansions (features, action, allowed, parent, t, prob)."""
        steps, adv_list = self.advantages(steps, episode_returns, gamma, step_weight, window)
        if not steps:
            return {"policy/loss": 0.0, "policy/steps": 0.0}
        adv = torch.tensor(adv_list)
        x = torch.tensor([s["features"] for s in steps])
        act = torch.tensor([self.index[s["action"]] for s in steps])
        mask = torch.full((len(steps), len(self.edits)), float("-inf"))
        for i, s in enumerate(steps):
            mask[i, [self.index[k] for k in s["allowed"] if k in self.index]] = 0.0
        with torch.no_grad():  # behaviour probabilities: recorded at sampling, else the current policy's
            current = torch.log_softmax(self.net(x) + mask, -1).gather(1, act.unsqueeze(1)).squeeze(1)
        old = torch.tensor([math.log(s["prob"]) if s.get("prob") else float(c) for s, c in zip(steps, current)])
        for _ in range(epochs):
            logp = torch.log_softmax(self.net(x) + mask, -1)
            ratio = torch.exp(logp.gather(1, act.unsqueeze(1)).squeeze(1) - old)
            surrogate = torch.minimum(ratio * adv, torch.clamp(ratio, 1 - clip, 1 + clip) * adv)
            p = logp.exp()
            entropy = -(p * torch.where(torch.isfinite(logp), logp, torch.zeros_like(logp))).sum(-1).mean()
            loss = -surrogate.mean() - entropy_coef * entropy
            self.opt.zero_grad()
            loss.backward()
            self.opt.step()
        self.updates += 1
        clipped = ((ratio - 1).abs() > clip).float().mean()
        return {
            "policy/loss": float(loss.detach()),
            "policy/entropy": float(entropy.detach()),
            "policy/adv_abs_mean": float(adv.abs().mean()),
            "policy/steps": float(len(steps)),
            "policy/clip_frac": float(clipped),
        }

    def save(self, path: str | Path) -> None:
        """Weights + optimizer state (resumable)."""
        torch.save(
            {
                "net": self.net.state_dict(),
                "opt": self.opt.state_dict(),
                "updates": self.updates,
                "edits": [e.key for e in self.edits],
            },
            path,
        )

    def load(self, path: str | Path) -> bool:
        """Restore from `save`; False when there is nothing to load."""
        p = Path(path)
        if not p.is_file():
            return False
        state = torch.load(p, weights_only=False)
        if state["edits"] != [e.key for e in self.edits]:
            raise ValueError(f"{p}: policy was trained on another edit catalogue")
        self.net.load_state_dict(state["net"])
        self.opt.load_state_dict(state["opt"])
        self.updates = state["updates"]
        return True


def state_json(state: WorkflowState) -> str:
    """Compact JSON of a state for the experience pool (graph and prompt omitted: the key names them)."""
    return json.dumps({"key": state.key, "spec": state.spec, "scores": state.scores}, sort_keys=True)


def episodes_from_items(
    items: list[dict], benchmark: str, exclude_run: str | None = None
) -> tuple[list[dict], dict[str, float]]:
    """Experience-pool items of AFlow expansions -> GiGPO steps and episode returns (best after - first before)."""
    steps, firsts, bests = [], {}, {}
    for it in sorted(items, key=lambda x: (x["run"], x["round"])):
        d = it["data"]
        if it["run"] == exclude_run or not d.get("edit") or not d.get("features"):
            continue
        steps.append(
            {
                "episode": it["run"],
                "group": benchmark,
                "t": it["round"],
                "parent": d.get("parent"),
                "reward": d["reward"],
                "anchor": it["anchor"],
                "features": d["features"],
                "action": d["edit"],
                "allowed": d.get("allowed") or [d["edit"]],
                "prob": d.get("prob"),
            }
        )
        firsts.setdefault(it["run"], d["before"])
        bests[it["run"]] = max(bests.get(it["run"], d["after"]), d["after"])
    return steps, {run: bests[run] - firsts[run] for run in firsts}
