"""Write docs/reference/configuration.md from the pydantic config models (run: python docs/gen_config_reference.py).

The models are the one source: each field's type, default and description come from them, so the page
cannot drift from the code (the docs build in the test suite regenerates it first).
"""

from __future__ import annotations

import sys
import typing
from pathlib import Path

from pydantic import BaseModel
from pydantic_core import PydanticUndefined

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from aflow_rl.config import AFlowConfig  # noqa: E402
from graph_planner.config import RepairEvalConfig  # noqa: E402
from graph_planner.corpus.history_spec import HistoryConfig  # noqa: E402
from graph_planner.corpus.spec import CorpusConfig  # noqa: E402
from planact.config import RunConfig, flatten  # noqa: E402

ROOTS = [
    (RunConfig, "Plan/Act runs and RL on code repair", "`configs/demo.yaml`, `configs/repair-*.yaml`; `planact train`"),
    (AFlowConfig, "AFlow with RL", "`configs/aflow-*.yaml`; `python -m flows.aflow`, `python -m flows.aflow_train`"),
    (RepairEvalConfig, "Code-repair evaluation", "`configs/repair-eval.yaml`; `planact repair evaluate`"),
    (CorpusConfig, "Code-repair corpus", "`configs/repair-corpus.yaml`; `planact repair corpus`"),
    (HistoryConfig, "Release-history tasks", "`configs/repair-history.yaml`; `planact repair corpus --history`"),
]

ROOT_MODELS = {model for model, _, _ in ROOTS}


def _type(annotation) -> str:
    text = repr(annotation) if not isinstance(annotation, type) else annotation.__name__
    for junk in ("typing.", "planact.", "aflow_rl.", "graph_planner.", "pydantic."):
        text = text.replace(junk, "")
    return text.replace("|", "\\|")


def _models(annotation) -> list[type[BaseModel]]:
    """Config models nested in a field's type (directly, in a list, or in a union)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return [m for arg in typing.get_args(annotation) for m in _models(arg)]


def _default(field) -> str:
    if field.default is not PydanticUndefined:
        value = field.default
    elif field.default_factory is not None:
        try:
            value = field.default_factory()
        except TypeError:  # a factory that takes the validated data
            return "(computed)"
    else:
        return "required"
    if isinstance(value, BaseModel):
        own = flatten(value.model_dump(exclude_unset=True))  # what this field's default sets over its model's
        return "(see below" + ("; here " + ", ".join(f"`{k}={v!r}`" for k, v in own.items()) if own else "") + ")"
    text = repr(value)
    return "`" + (text if len(text) <= 60 else text[:57] + "...") + "`"


def section(model: type[BaseModel], path: str, seen: set) -> list[str]:
    """A table of the model's fields, then a section per nested model."""
    lines = [
        f"### `{path}`",
        "",
        (model.__doc__ or "").strip().splitlines()[0] if model.__doc__ else "",
        "",
        "| field | type | default | description |",
        "|---|---|---|---|",
    ]
    nested = []
    for name, field in model.model_fields.items():
        desc = (field.description or "").replace("|", "\\|").replace("\n", " ")
        lines.append(f"| `{name}` | {_type(field.annotation)} | {_default(field)} | {desc} |")
        for sub in _models(field.annotation):
            nested.append((sub, f"{path}.{name}"))
    lines.append("")
    for sub, sub_path in nested:
        if sub in ROOT_MODELS:  # documented in its own part of the page
            lines += [f"`{sub_path}`: an `{sub.__name__}`, whose fields are in its own part of this page.", ""]
        elif (sub, sub_path) not in seen:
            seen.add((sub, sub_path))
            lines += section(sub, sub_path, seen)
    return lines


def render() -> str:
    """The whole page."""
    out = [
        "# Configuration reference",
        "",
        "Generated from the pydantic models by `docs/gen_config_reference.py` (do not edit by hand). A YAML",
        "file in `configs/` sets any of these fields; `--set a.b=value` overrides one on the command line;",
        "in the Prefect UI they are the deployment's parameter form. An invalid value fails before any work",
        "starts, naming the field.",
        "",
    ]
    for model, title, where in ROOTS:
        out += [f"## {title}", "", f"`{model.__module__}.{model.__name__}` — {where}.", ""]
        out += section(model, model.__name__, set())
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    target = ROOT / "docs" / "reference" / "configuration.md"
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(render())
    print(f"wrote {target.relative_to(ROOT)}")
