"""Configuration of release-history tasks: pairs of consecutive releases of a package, each sdist pinned."""

from __future__ import annotations

from pathlib import Path

import yaml
from pydantic import Field, ValidationError, field_validator, model_validator

from graph_planner.corpus.spec import HISTORY_SPLIT, PackageRef, Sha256OrEmpty
from planact.config_base import ConfigError, StrictConfig

__all__ = ["HISTORY_SPLIT", "HistoryConfig", "HistoryPair", "Release", "load_history_config"]


class Release(StrictConfig):
    """One release of the pair: its version and the sdist's sha256 (or a local folder standing in for it)."""

    version: str = Field(description="Exact version on the index.")
    sha256: Sha256OrEmpty = Field("", description="sha256 of the release's sdist; pip refuses any other file.")
    source: str = Field(
        "", description="A local folder holding the release (source and tests) instead of the sdist (tests)."
    )


class HistoryPair(StrictConfig):
    """Two consecutive releases of one package: the older one's code, the newer one's fixes and tests."""

    name: str = Field(description="Package name on the index (e.g. parse).")
    old: Release = Field(description="The older release: its source is every task's base commit.")
    new: Release = Field(description="The newer release: its function changes are the candidate fixes.")
    deps: list[PackageRef] = Field(
        default_factory=list,
        description="Pure-Python dependencies the tests import; unpacked and put on PYTHONPATH, never installed.",
    )
    pytest_args: list[str] = Field(default_factory=list, description="Extra pytest arguments (e.g. a --deselect).")
    source_root: str = Field(
        "auto",
        description="Folder holding the importable package in the older release: '.', 'src', or 'auto' (src when "
        "the release has a src/ folder).",
    )
    unpinned: bool = Field(
        False, description="Fetch without sha256 pins (trying a new pair); the report prints both hashes to pin."
    )

    @model_validator(mode="after")
    def _pinned(self) -> HistoryPair:
        if self.old.version == self.new.version:
            raise ValueError(f"{self.name}: old and new are the same release {self.old.version}")
        for side in (self.old, self.new):
            if not (side.sha256 or side.source or self.unpinned):
                raise ValueError(f"{self.name}=={side.version}: give sha256 (fetched sdist) or source (local folder)")
        return self

    @property
    def key(self) -> str:
        """name-old-new: the folder, repository and report name, and the instance ids' prefix."""
        return f"{self.name}-{self.old.version}-{self.new.version}"


class HistoryConfig(StrictConfig):
    """Release-history tasks: pairs of releases plus the test-run limits."""

    pairs: list[HistoryPair] = Field(description="The release pairs to build tasks from.")
    timeout_s: float = Field(
        60.0,
        gt=0,
        description="Wall-clock limit of one run of the whole suite; a change's tests are judged by CPU seconds "
        "(4x the clean suite's, at least 20, plus 0.05 s per test run), as mutants are.",
    )
    max_suite_s: float = Field(
        60.0, gt=0, description="A pair whose suite takes longer on the older release is refused."
    )
    max_group: int = Field(
        3,
        ge=1,
        le=6,
        description="Functions one multi-function fix may span, tried only for tests no single function fixes "
        "(1 = single functions only).",
    )
    workers: int = Field(0, ge=0, description="Test runs in parallel; 0 = one per CPU.")
    jail: bool = Field(
        False,
        description="Qualify each task for the call jail before its gold fix is judged (graph_planner/jail_qualify.py) "
        "and store the result with it: a jailed task's fix is then judged down the jailed path, where the patch "
        "check screens structure only; two more sandbox runs per task.",
    )

    @field_validator("pairs")
    @classmethod
    def _distinct(cls, v: list[HistoryPair]) -> list[HistoryPair]:
        keys = [p.key for p in v]
        twice = sorted({k for k in keys if keys.count(k) > 1})
        if twice:
            raise ValueError(f"pairs listed twice: {twice}")
        return v

    def pair(self, name: str, old: str, new: str) -> HistoryPair | None:
        """The configured pair name old -> new, or None."""
        return next((p for p in self.pairs if (p.name, p.old.version, p.new.version) == (name, old, new)), None)


def load_history_config(path: str | Path) -> HistoryConfig:
    """Read a release-history YAML; an invalid file raises ConfigError naming each bad field."""
    data = yaml.safe_load(Path(path).read_text()) or {}
    try:
        return HistoryConfig.model_validate(data)
    except ValidationError as e:
        fields = "; ".join(f"{'.'.join(map(str, err['loc']))}: {err['msg']}" for err in e.errors())
        raise ConfigError(f"{path}: {fields}") from None
