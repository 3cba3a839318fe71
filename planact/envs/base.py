"""The environment plug-in of the round DAG: one interface, a kind per installed environment (env.kind).

The flow never looks inside an environment. A round asks it for tasks, lets it drive the planner
(one completion per plan, or several turns of a multi-turn episode), turns the plans into actor
requests, and has it score the actor's answers into per-role training samples. The same interface
gives the warm start its demonstrations and the held-out evaluation its metrics.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any, Protocol

from planact.engines.base import Completion
from planact.progress import ProgressFn, takes_progress


class Policy(Protocol):
    """A role's engines as the environment sees them (Ray actors in a run, a worker in-process in tests)."""

    def generate(
        self, prompts: list[str], temperature: float | None = None, *, n: int, seed: int | None = None
    ) -> list[list[Completion]]:
        """Free sampling: n completions per prompt."""

    def choose(
        self,
        requests: list[tuple[str, list[str]]],
        temperature: float | None = None,
        *,
        n: int,
        seed: int | None = None,
    ) -> list[list[Completion]]:
        """Constrained sampling: n picks per (prompt, candidates) from the model's distribution over the set."""


class RoundEnv(Protocol):
    """What a round needs from an environment."""

    actor_method: str
    """The actor engine method that answers actor_requests: 'generate' (prompts) or 'choose' (candidate sets)."""
    headline_keys: tuple[str, ...]
    """Held-out metrics (of `evaluate`) a run's summary compares between the warm start and the end of RL,
    the most telling first (the progress line shows the first one present)."""

    def sample_tasks(self, round_idx: int) -> list[dict]:
        """The round's training tasks (deterministic in seed and round: both jobs of two-job mode agree)."""

    def plan(self, batch: list[dict], planner: Policy, seed: int) -> list[list[Any]]:
        """planner.group_size plans per task."""

    def actor_requests(self, batch: list[dict], plans: list[list[Any]] | None) -> list[Any]:
        """One actor request per (task, plan), task-major; without plans (barrier fallback) one per task."""

    def score(
        self, batch: list[dict], plans: list[list[Any]] | None, answers: list[list[Completion]], n_rollouts: int = 0
    ):
        """Verify the answers and credit both roles (a planact.rollout.RoundResult)."""

    def demonstrations(self, role: str, count: int, rng: random.Random) -> list[tuple[str, str]]:
        """(prompt, target) pairs for a role's supervised warm start."""

    def evaluate(self, planner: Policy, actor: Policy, progress: ProgressFn | None = None) -> dict[str, float]:
        """Held-out metrics of the team; an evaluation that takes minutes reports k of n to `progress`."""

    def tokenizer_texts(self) -> list[str]:
        """Text a locally trained tokenizer learns from (tiny models with tokenizer: bpe)."""


# Environments register from above: a package that builds on planact (graph_planner's repair team)
# declares an entry point in the `planact.envs` group, and planact never imports it by name.
ENTRY_POINT_GROUP = "planact.envs"
_registered: dict[str, Callable[[Any], RoundEnv]] = {}


def register_env(kind: str, factory: Callable[[Any], RoundEnv]) -> None:
    """Make `factory(cfg) -> RoundEnv` the environment of `env.kind: <kind>` in this process."""
    _registered[kind] = factory


def env_factory(kind: str) -> Callable[[Any], RoundEnv]:
    """The factory for an environment kind: registered in code, else the installed entry point of that name."""
    if kind in _registered:
        return _registered[kind]
    from importlib.metadata import entry_points

    found = {ep.name: ep for ep in entry_points(group=ENTRY_POINT_GROUP)}
    if kind not in found:
        raise ValueError(
            f"env.kind {kind!r}: no environment of that kind is installed (entry points of "
            f"{ENTRY_POINT_GROUP!r}: {sorted(found) or 'none'}; reinstall the project: pip install -e .)"
        )
    return found[kind].load()


def headline_keys(kind: str) -> tuple[str, ...]:
    """The headline held-out metrics of the environment of `kind` (its class's `headline_keys`)."""
    return tuple(getattr(env_factory(kind), "headline_keys", ()))


def make_env(cfg, progress: ProgressFn | None = None) -> RoundEnv:
    """The run's environment plug-in (cfg.env.kind); `progress` hears a slow set-up (the repair env's
    localisation contexts) when the plug-in takes one."""
    factory = env_factory(cfg.env.kind)
    if progress is not None and takes_progress(factory):
        return factory(cfg, progress=progress)
    return factory(cfg)


def evaluate(env: RoundEnv, planner: Policy, actor: Policy, progress: ProgressFn | None = None) -> dict[str, float]:
    """`env.evaluate`, with `progress` when the plug-in reports it (one written before it existed does not)."""
    if progress is not None and takes_progress(env.evaluate):
        return env.evaluate(planner, actor, progress=progress)
    return env.evaluate(planner, actor)
