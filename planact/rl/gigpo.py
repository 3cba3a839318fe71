"""GiGPO advantages (verl-agent; shared/REFERENCE.md): A = A_episode + w * A_step.

Episode level: returns normalised within the episode group (singleton group: mean 0, std 1).
Step level: discounted returns R_t = r_t + gamma * R_{t+1} inside each episode, normalised within
anchor groups: steps of the same episode group whose observations (anchor keys) are identical
(singleton anchor group: 0).
"""

from __future__ import annotations

import statistics
from collections import defaultdict


def _normalise(values: list[float], std_normalize: bool, eps: float, singleton: str) -> list[float]:
    if len(values) == 1:
        return [values[0]] if singleton == "identity" else [0.0]
    mean = statistics.fmean(values)
    std = statistics.stdev(values) if std_normalize else 1.0
    return [(v - mean) / ((std if std_normalize else 1.0) + (eps if std_normalize else 0.0)) for v in values]


def discounted_returns(rewards: list[float], gamma: float) -> list[float]:
    """R_t = r_t + gamma * R_{t+1}, computed backwards."""
    out, acc = [0.0] * len(rewards), 0.0
    for t in range(len(rewards) - 1, -1, -1):
        acc = rewards[t] + gamma * acc
        out[t] = acc
    return out


def gigpo_advantages(steps: list[dict], episode_returns: dict[str, float], gamma: float = 0.95,
                     step_weight: float = 1.0, std_normalize: bool = True, eps: float = 1e-6) -> list[float]:
    """Advantage per step; each step has keys episode, group, t, reward, anchor (hashable)."""
    # Episode level, per group of episodes.
    groups: dict = defaultdict(list)
    for ep in {(s["group"], s["episode"]) for s in steps}:
        groups[ep[0]].append(ep[1])
    a_ep: dict = {}
    for g, eps_ in groups.items():
        eps_ = sorted(eps_)
        for ep, a in zip(eps_, _normalise([episode_returns[e] for e in eps_], std_normalize, eps, "identity")):
            a_ep[(g, ep)] = a
    # Step level: discounted returns inside each episode, then anchor groups inside each episode group.
    ret: dict[int, float] = {}
    by_episode: dict = defaultdict(list)
    for i, s in enumerate(steps):
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
        for i, a in zip(idx, _normalise([ret[i] for i in idx], std_normalize, eps, "zero")):
            a_step[i] = a
    return [a_ep[(s["group"], s["episode"])] + step_weight * a_step[i] for i, s in enumerate(steps)]
