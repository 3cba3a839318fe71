"""Corpus configuration: which pinned packages to mutate, how to run their tests, how many tasks."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated, Literal, get_args

import yaml
from pydantic import AfterValidator, Field, ValidationError, field_validator

from graph_planner.corpus.mutate import KINDS
from planact.config_base import ConfigError, StrictConfig

# One task file per split; unseen_2025 holds packages first released in 2025 or later.
CorpusSplit = Literal["train", "heldout", "unseen_2025"]
CORPUS_SPLITS: tuple[str, ...] = get_args(CorpusSplit)
# Release-history tasks (graph_planner.corpus.history): real fixes from consecutive releases, built by pair
# rather than by package, so never a mutation package's split.
HISTORY_SPLIT = "real"
# Every split a corpus folder may hold a task file for (what load_tasks and `evaluate --split` accept).
TASK_SPLITS: tuple[str, ...] = (*CORPUS_SPLITS, HISTORY_SPLIT)


def _hex_digest(v: str) -> str:
    if not re.fullmatch(r"[0-9a-f]{64}", v):
        raise ValueError("a sha256 is 64 lowercase hex digits")
    return v


def _hex_digest_or_empty(v: str) -> str:
    return v and _hex_digest(v)


# An sdist's pin, as pip checks it. The corpus's and the release-history configs use these two types rather
# than a validator each: one rule, one message.
Sha256 = Annotated[str, AfterValidator(_hex_digest)]
Sha256OrEmpty = Annotated[str, AfterValidator(_hex_digest_or_empty)]
"""A pin that may be left empty (a local source folder, or an unpinned trial that prints the hash to pin)."""


class PackageRef(StrictConfig):
    """A pinned sdist: name==version with the archive's sha256."""

    name: str = Field(description="Package name on the index (e.g. text-unidecode).")
    version: str = Field(description="Exact version.")
    sha256: Sha256 = Field(description="sha256 of the sdist archive; pip refuses any other file.")

    @property
    def key(self) -> str:
        """name-version, the folder and repository name."""
        return f"{self.name}-{self.version}"


class PackageSpec(PackageRef):
    """One package of the corpus: its sdist (or a local source folder), dependencies, test settings."""

    sha256: Sha256OrEmpty = Field("", description="sha256 of the sdist; empty only with `source`.")
    source: str = Field("", description="A local source folder used instead of fetching the sdist.")
    split: CorpusSplit = Field(
        "train",
        description="Which split its tasks go to (split by package): train, heldout (never trained on), or "
        "unseen_2025 (held out and first released in 2025 or later, after the pretrained models' data was "
        "collected: the memorisation control).",
    )
    deps: list[PackageRef] = Field(
        default_factory=list,
        description="Pure-Python dependencies the tests import; unpacked and put on PYTHONPATH, never installed.",
    )
    pytest_args: list[str] = Field(default_factory=list, description="Extra pytest arguments (e.g. a --deselect).")
    unpinned: bool = Field(
        False, description="Fetch without a sha256 (trying a new package); the report prints the hash to pin."
    )
    max_tried: int | None = Field(
        None,
        ge=1,
        description="This package's own max_tried (None: the corpus's): a small budget for a held-out package.",
    )
    source_root: str = Field(
        "auto",
        description="Folder holding the importable package: '.', 'src', or 'auto' (src when the source has a src/ "
        "folder).",
    )


class CorpusConfig(StrictConfig):
    """A task corpus: packages plus the mutation and validation budget."""

    packages: list[PackageSpec] = Field(description="The packages to build tasks from.")
    seed: int = Field(0, description="Seed of the mutant sampling order.")
    kinds: list[str] = Field(default_factory=lambda: list(KINDS), description="Mutation operators to use.")
    per_function: int = Field(3, ge=1, description="Mutants tried per covered function at most (distinct kinds first).")
    max_tried: int = Field(90, ge=1, description="Mutants validated per package at most.")
    max_kept: int = Field(70, ge=1, description="Tasks kept per package at most.")
    timeout_s: float = Field(
        60.0,
        gt=0,
        description="Limit of one test run: wall-clock seconds for the clean suite; CPU seconds for a mutant's tests, "
        "where the limit is 4x the clean suite's CPU seconds (at least 20, at most this) plus 0.05 s per test "
        "the mutant runs, so the same mutants are kept on a loaded machine and an idle one.",
    )
    max_suite_s: float = Field(
        60.0, gt=0, description="A package whose clean suite takes longer is refused (slow suites make slow episodes)."
    )
    workers: int = Field(0, ge=0, description="Test runs in parallel; 0 = one per CPU.")
    jail: bool = Field(
        False,
        description="Qualify each kept task for the call jail (graph_planner/jail_qualify.py: its gold fix passes "
        "and its bug fails with the target function run only in a seccomp-jailed child) and store the result "
        "with the task; two more sandbox runs per task.",
    )

    @field_validator("kinds")
    @classmethod
    def _known(cls, v: list[str]) -> list[str]:
        unknown = sorted(set(v) - set(KINDS))
        if unknown:
            raise ValueError(f"unknown mutation kinds {unknown}; known: {list(KINDS)}")
        return v

    @field_validator("packages")
    @classmethod
    def _pinned(cls, v: list[PackageSpec]) -> list[PackageSpec]:
        for p in v:
            if not p.sha256 and not p.source and not p.unpinned:
                raise ValueError(f"{p.key}: give sha256 (fetched sdist) or source (local folder)")
        return v


def load_corpus_config(path: str | Path, **overrides) -> CorpusConfig:
    """Read a corpus YAML; an invalid file raises ConfigError naming each bad field."""
    data = yaml.safe_load(Path(path).read_text()) or {}
    data.update({k: v for k, v in overrides.items() if v is not None})
    try:
        return CorpusConfig.model_validate(data)
    except ValidationError as e:
        fields = "; ".join(f"{'.'.join(map(str, err['loc']))}: {err['msg']}" for err in e.errors())
        raise ConfigError(f"{path}: {fields}") from None
