"""GiGPO advantages (Feng et al. 2025, as verl-agent computes them): A = A_episode + w * A_step.

Episode level: each step carries its episode's return; the returns are normalised over the steps of
the episode group (verl-agent's default, statistics "across steps"). So an episode alone in its group
gets 0, however many steps it has; a group holding a single step keeps its raw return (mean 0, std 1).
Step level: discounted returns R_t = r_t + gamma * R_{t+1} inside each episode (or returns the caller
computed, e.g. along a search tree), normalised within anchor groups: steps of the same episode group
whose observations (anchor keys) are identical (singleton anchor group: 0).
"""

from __future__ import annotations

import statistics
from collections import defaultdict

from planact.rl.advantages import normalise


def discounted_returns(rewards: list[float], gamma: float) -> list[float]:
    """R_t = r_t + gamma * R_{t+1}, computed backwards."""
    out, acc = [0.0] * len(rewards), 0.0
    for t in range(len(rewards) - 1, -1, -1):
        acc = rewards[t] + gamma * acc
        out[t] = acc
    return out


def gigpo_advantages(
    steps: list[dict],
    episode_returns: dict[str, float],
    gamma: float = 0.95,
    step_weight: float = 1.0,
    std_normalize: bool = True,
    eps: float = 1e-6,
) -> list[float]:
    """Advantage per step; each step has keys episode, group, t, reward, anchor (hashable), optionally `return`."""
    # Episode level: one entry per step, so the statistics weigh episodes by their steps (verl-agent).
    by_group: dict = defaultdict(list)
    for i, s in enumerate(steps):
        by_group[s["group"]].append(i)
    a_ep = [0.0] * len(steps)
    for idx in by_group.values():
        for i, a in zip(
            idx, normalise([episode_returns[steps[i]["episode"]] for i in idx], std_normalize, eps, "identity")
        ):
            a_ep[i] = a
    # Step level: discounted returns inside each episode, then anchor groups inside each episode group.
    ret: dict[int, float] = {i: s["return"] for i, s in enumerate(steps) if "return" in s}
    by_episode: dict = defaultdict(list)
    for i, s in enumerate(steps):
        if "return" not in s:
            by_episode[(s["group"], s["episode"])].append(i)
    for idx in by_episode.values():
        idx.sort(key=lambda i: steps[i]["t"])
        for i, r in zip(idx, discounted_returns([steps[i]["reward"] for i in idx], gamma)):
            ret[i] = r
    anchors: dict = defaultdict(list)
    for i, s in enumerate(steps):
        anchors[(s["group"], s["anchor"])].append(i)
    a_step = [0.0] * len(steps)
    for idx in anchors.values():
        for i, a in zip(idx, normalise([ret[i] for i in idx], std_normalize, eps, "zero")):
            a_step[i] = a
    return [a_ep[i] + step_weight * a_step[i] for i in range(len(steps))]


def tree_returns(steps: list[dict], gamma: float) -> list[float]:
    """Returns along a search tree: R(node) = r(node) + gamma * mean R(children), per episode.

    Each step is an expansion with `t` (the node it created) and `parent` (the node it expanded), so a
    node's return only mixes rewards of its own descendants, never of unrelated branches.
    """
    out = [0.0] * len(steps)
    by_episode: dict = defaultdict(list)
    for i, s in enumerate(steps):
        by_episode[s["episode"]].append(i)
    for idx in by_episode.values():
        value: dict = {}
        children: dict = defaultdict(list)
        for i in sorted(idx, key=lambda i: -steps[i]["t"]):  # children were created after their parents
            kids = children[steps[i]["t"]]
            value[steps[i]["t"]] = steps[i]["reward"] + (gamma * statistics.fmean(kids) if kids else 0.0)
            children[steps[i].get("parent")].append(value[steps[i]["t"]])
            out[i] = value[steps[i]["t"]]
    return out
