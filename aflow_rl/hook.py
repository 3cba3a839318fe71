"""The AFlow hook of a Plan/Act run (its `aflow` section): a workflow search around the current models every
N rounds, run as an aflow-optimize sub-flow (flows/plan_act.py).

planact finds AFlowHookConfig by its entry point (`planact.config_sections`, name `aflow`) and never imports
this package. The search's settings are an AFlowConfig: the hook's own defaults are set once below
(`_small_search`), every other default is AFlowConfig's, and the fields that name the run (`RUN_FILLED`) are
filled from the Plan/Act run at each search.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from pydantic import Field, model_validator

from aflow_rl.config import AFlowConfig, LLMConfig, SearchConfig, TrackingConfig
from planact.config_base import StrictConfig, keep_section_defaults

if TYPE_CHECKING:  # planact builds its run config from this module: no import of it at run time
    from planact.config import RunConfig

# AFlowConfig's fields that the run fills at each search: its name, folder and seed, the checkpoint the
# executor loads, its Ray and MLflow.
RUN_FILLED = ("run_name", "root", "workspace", "seed", "executor", "ray", "tracking")


def _small_search() -> AFlowConfig:
    """A search sized to sit between training rounds: few rounds on a slice of validation, in the flow's threads."""
    return AFlowConfig(
        search=SearchConfig(max_rounds=3, validation_repeats=2), limit=20, shards=1, task_runner="threads"
    )


class AFlowHookConfig(StrictConfig):
    """Optimise the workflow around the current models every N rounds (an aflow-optimize sub-flow)."""

    # The searches shape no checkpoint of the run: a resumed run may change them (planact.resume).
    resume_may_change: ClassVar[bool] = True
    # The hook's settings before they became its embedded AFlow config's (old name -> new).
    moved: ClassVar[dict[str, str]] = {
        "max_rounds": "optimise.search.max_rounds",
        "validation_repeats": "optimise.search.validation_repeats",
        "limit": "optimise.limit",
        "shards": "optimise.shards",
        "task_runner": "optimise.task_runner",
        "policy": "optimise.policy.enabled",
    }

    every_rounds: int = Field(
        0,
        ge=0,
        description="Run an AFlow search after every this many rounds (0 = never); must be a multiple of "
        "checkpoint.every.",
    )
    optimise: AFlowConfig = Field(
        default_factory=_small_search,
        description="The search, as the aflow-optimize flow's config: by default one sized to sit between training "
        "rounds (fewer search rounds and validation repeats, a slice of the validation split, one shard, in the "
        "flow's threads), every other setting AFlowConfig's default. Filled from the run at each search, so "
        f"left out here: {', '.join(RUN_FILLED)}.",
    )

    @model_validator(mode="before")
    @classmethod
    def _small_by_default(cls, data: Any) -> Any:
        if isinstance(data, dict) and data.keys() & cls.moved.keys():
            old = sorted(data.keys() & cls.moved.keys())[0]
            raise ValueError(f"aflow.{old} is now aflow.{cls.moved[old]} (the search's own AFlow config)")
        # Setting one field of the search keeps the hook's other defaults (not AFlowConfig's).
        return keep_section_defaults(cls, data, ("optimise",))

    @model_validator(mode="after")
    def _run_fills(self) -> AFlowHookConfig:
        for name in RUN_FILLED:
            if getattr(self.optimise, name) != AFlowConfig.model_fields[name].get_default(call_default_factory=True):
                raise ValueError(f"aflow.optimise.{name} is filled from the Plan/Act run at each search: leave it out")
        return self

    def check_run(self, run: RunConfig) -> None:
        """The searches fall on checkpoints and drive both roles (planact calls this at validation)."""
        if self.every_rounds and self.every_rounds % run.checkpoint.every:
            raise ValueError(
                "aflow.every_rounds must be a multiple of checkpoint.every (it searches around a checkpoint)"
            )
        if self.every_rounds and run.agent_role != "both":
            raise ValueError(
                "aflow.every_rounds needs agent_role 'both' (the search executes planner and actor together)"
            )

    def due(self, round_idx: int) -> bool:
        """True when a search follows this round."""
        return bool(self.every_rounds) and round_idx % self.every_rounds == 0

    def search_config(
        self, run: RunConfig, round_idx: int, checkpoint: str | Path, root: str | Path, tracking_uri: str
    ) -> AFlowConfig:
        """The search around round `round_idx`'s checkpoint: `optimise` with the run's fields filled in."""
        return self.optimise.model_copy(
            update={
                "run_name": f"{run.run_name}-aflow-r{round_idx}",
                "root": str(root),
                "seed": run.seed,
                "executor": LLMConfig(kind="planact", checkpoint=str(checkpoint)),
                "ray": run.ray.model_copy(),
                "tracking": TrackingConfig(tracking_uri=tracking_uri, experiment=run.tracking.experiment),
            }
        )
