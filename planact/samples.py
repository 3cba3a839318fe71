"""The training sample: what every producer (Plan/Act rollouts, the repair team, AFlow's optimizer RL) hands
the trainer and the experience pool, and what the trainer reads.

A TypedDict rather than a class: samples travel as JSON lines in the experience pool, in Ray payloads and
across a resume, where a plain mapping stays readable by every version of the code; the type is for readers
and type checkers. `Completion.sample_fields()` (planact/engines/base.py) is the one conversion from a
completion; `planact.rollout.sample_record` adds the reward, advantage and whose episode it is.
"""

from __future__ import annotations

from typing import Required, TypedDict


class Sample(TypedDict, total=False):
    """One sampled response with its credit."""

    prompt_ids: Required[list[int]]
    token_ids: Required[list[int]]  # response tokens, EOS included when the model stopped
    logprobs: Required[list[float]]  # the sampler's log p of each response token
    advantage: Required[float]
    text: str
    weight_version: int  # the weights that sampled it
    reward: float
    role: str  # planner | actor
    task_id: str
    group: str  # the GRPO group (a task, or a GiGPO anchor state)
    finish_reason: str  # stop | length
    staleness: int  # set by the trainer's worker: weight versions behind the trainer
    prox_logprobs: list[float]  # set by the trainer for stale samples: log p under the previous version
