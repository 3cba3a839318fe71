"""The round batch: one round's training samples, per role, as they travel from rollout to the experience pool
and the trainer.

Every producer (the Plan/Act scorer, the repair team's scorer, AFlow's optimizer RL) ends a round with one
`RoundBatch`; the flow records it in the pool (`RoundBatch.items`) and hands each trained role its part
(`RoundBatch.only`, `RoundBatch.samples`). The samples themselves stay plain `Sample` mappings (see
planact/samples.py for why); the batch is the typed envelope around them.

The pool's JSON lines are the batch's plain form: `items` writes them and `from_items` reads them back. The
item layout is the one the pool has always stored (`pool_item`), so pools written before the batch existed
read back the same, and a pool written now stays readable by older code (a resume either way).

Through Prefect a batch travels inside a `Payload` box (tasks/plan_act.py): Prefect walks dataclass
parameters looking for futures, and a round's token lists made that walk cost seconds.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from planact.samples import Sample


@dataclass(frozen=True)
class RoundBatch:
    """One round's samples per role (in the order they were produced), with what the pool and trainer read."""

    round: int
    by_role: Mapping[str, list[Sample]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        # Read-only view of a private copy: a batch handed to two stages (pool, trainer) cannot be changed by one.
        object.__setattr__(self, "by_role", MappingProxyType({r: list(s) for r, s in self.by_role.items()}))

    def __reduce__(self):
        # MappingProxyType does not pickle (Ray payloads, Prefect results): rebuild from a plain dict.
        return (RoundBatch, (self.round, dict(self.by_role)))

    @property
    def roles(self) -> list[str]:
        """The roles that have samples this round, in the order they were added."""
        return [r for r, s in self.by_role.items() if s]

    def samples(self, role: str) -> list[Sample]:
        """The role's samples ([] when it has none this round)."""
        return list(self.by_role.get(role, ()))

    def only(self, *roles: str) -> RoundBatch:
        """The same round with just these roles (what one role's trainer or one job of two-job mode gets)."""
        return RoundBatch(self.round, {r: s for r, s in self.by_role.items() if r in roles})

    def counts(self) -> dict[str, int]:
        """Samples per role."""
        return {r: len(s) for r, s in self.by_role.items()}

    def __len__(self) -> int:
        return sum(len(s) for s in self.by_role.values())

    def task_ids(self, role: str) -> list[str]:
        """The distinct tasks (episodes) the role's samples came from, in first-seen order."""
        return list(dict.fromkeys(str(s["task_id"]) for s in self.by_role.get(role, ()) if "task_id" in s))

    def weight_versions(self, role: str) -> list[int]:
        """The distinct weight versions the role's samples were drawn under, ascending."""
        return sorted({int(s["weight_version"]) for s in self.by_role.get(role, ()) if "weight_version" in s})

    def items(self, run: str, anchor_key: str = "group") -> list[dict]:
        """The batch as experience-pool items with stable ids (a re-run round replaces its own items)."""
        return [
            pool_item(f"{run}/{self.round}/{role}/{i}", run, self.round, role, s.get(anchor_key), s.get("advantage"), s)
            for role, samples in self.by_role.items()
            for i, s in enumerate(samples)
        ]

    @classmethod
    def from_items(cls, items: Iterable[Mapping[str, Any]], round_idx: int | None = None) -> RoundBatch:
        """A round's batch back from the pool's items (as `ExperienceStore.query` returns them); the round is
        the items' own unless given. Items of several rounds are refused: a batch is one round."""
        items = list(items)
        rounds = {int(it["round"]) for it in items}
        if len(rounds) > 1:
            raise ValueError(f"items of rounds {sorted(rounds)}: a batch holds one round")
        by_role: dict[str, list[Mapping[str, Any]]] = {}
        for it in items:
            by_role.setdefault(str(it["role"]), []).append(it)
        # Within a role, the id's index is the order the round produced the samples: the pool returns items by
        # append time, which a partly re-run round may have shuffled.
        by_role = {r: sorted(its, key=_index) for r, its in by_role.items()}
        rnd = round_idx if round_idx is not None else (rounds.pop() if rounds else 0)
        return cls(rnd, {r: [it["data"] for it in its] for r, its in by_role.items()})


def pool_item(
    item_id: str, run: str, round_idx: int, role: str, anchor: Any, advantage: float | None, data: Any, **extra: Any
) -> dict:
    """One experience-pool item: the layout every pool writer uses (the id a re-run replaces, the fields the
    pool indexes, a priority that favours strong credit, and the payload)."""
    return {
        "id": item_id,
        "run": run,
        "round": round_idx,
        "role": role,
        "anchor": anchor,
        **extra,
        "priority": 1.0 + abs(float(advantage or 0.0)),
        "data": data,
    }


def _index(it: Mapping[str, Any]) -> tuple[int, str]:
    tail = str(it["id"]).rsplit("/", 1)[-1]
    return (int(tail) if tail.isdigit() else -1, str(it["id"]))
