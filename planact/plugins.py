"""Config sections that plug-ins own: planact builds its run config from what is installed, naming none of them.

A plug-in declares each of its sections in the `planact.config_sections` entry point group, named by the
section's place in the run config: `env.<kind>` holds the settings of the environment of that kind (the
`planact.envs` group's; graph_planner's `env.repair`), a plain name is a section of the run itself
(aflow_rl's `aflow`). The entry point is a pydantic model on planact.config_base.StrictConfig; its defaults are
the section's, written there once. The model may define

    check_run(self, run) -> None    rules across sections, at validation: raise ValueError naming the fields
    preflight(self, run) -> None    before any work starts, what the world must hold: raise ConfigError

and planact calls them on the section of the run's environment kind and on every top-level plug-in section.
For the resume guard (planact.resume) a section may also declare, as ClassVars,

    resume_may_change: bool         the whole section may change when a run resumes (it shapes no checkpoint)
    moved: dict[str, str]           fields renamed or moved inside the section since runs were stored (old
                                    dotted name -> new), so that a stored config is read under the new names
"""

from __future__ import annotations

from importlib.metadata import entry_points
from typing import Any

from pydantic import BaseModel, Field, create_model

SECTIONS_GROUP = "planact.config_sections"
ENVS_GROUP = "planact.envs"


def installed() -> dict[str, type[BaseModel]]:
    """Every installed plug-in section model by its dotted place in the run config ('env.repair', 'aflow')."""
    return {ep.name: ep.load() for ep in sorted(entry_points(group=SECTIONS_GROUP), key=lambda ep: ep.name)}


def sections(under: str = "") -> dict[str, type[BaseModel]]:
    """The installed plug-in section models directly under a place of the run config ('' = the top, 'env')."""
    return {path.rpartition(".")[2]: model for path, model in installed().items() if path.rpartition(".")[0] == under}


def env_kinds() -> tuple[str, ...]:
    """The installed environment kinds: the names of the `planact.envs` entry point group."""
    return tuple(sorted({ep.name for ep in entry_points(group=ENVS_GROUP)}))


def with_sections(base: type[BaseModel], found: dict[str, type[BaseModel]], **fields: Any) -> type[BaseModel]:
    """`base` plus a field per plug-in section (its default: the section model's defaults) and `fields`
    (name=(type, Field) that replace base's fields of that name in place)."""
    clash = sorted(set(found) & (set(base.model_fields) | set(fields)))
    if clash:
        raise TypeError(f"{SECTIONS_GROUP}: plug-in sections {clash} would replace fields of {base.__name__}")
    extra = {
        name: (model, Field(default_factory=model, description=" ".join((model.__doc__ or name).split())))
        for name, model in found.items()
    }
    name = base.__name__.lstrip("_")
    model = create_model(name, __base__=base, __module__=base.__module__, __doc__=base.__doc__, **fields, **extra)
    model.__qualname__ = name  # pickled by reference under the module's public name
    return model


def call_hook(sections_: list[BaseModel], hook: str, run: Any) -> None:
    """Call `hook(run)` on each section that defines it (check_run, preflight)."""
    for section in sections_:
        method = getattr(section, hook, None)
        if method is not None:
            method(run)
