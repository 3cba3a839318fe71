"""The planner's typed actions (pydantic): Explore, Memory, Repair, Submit, and parsing model output.

A model writes one JSON object per turn, e.g.
  {"type": "explore", "op": "find", "anchors": ["percentage"]}
  {"type": "explore", "op": "read", "nodes": ["parse/__init__.py::percentage"]}
  {"type": "explore", "op": "expand", "nodes": ["parse/__init__.py::percentage"], "hop": 1}
  {"type": "explore", "op": "coverage", "formula": "ochiai"}
  {"type": "explore", "op": "candidates", "nodes": ["parse/__init__.py::percentage"], "proposals": 16}
  {"type": "memory", "ops": [{"op": "add", "node": "parse/__init__.py::percentage"}]}
  {"type": "repair", "apply": true, "plan": "...", "target": "parse/__init__.py::percentage",
   "patch": "--- a/parse/__init__.py\n+++ b/parse/__init__.py\n@@ ...", "edits": []}
  {"type": "submit"}
`parse_action` turns text or a dict into one of these or raises ActionError with what was wrong.
"""

from __future__ import annotations

import json
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, TypeAdapter, ValidationError

from graph_planner.env_config import MAX_PROPOSALS

MAX_ANCHOR_CHARS = 20_000
"""Longest `find` anchor: a whole traceback fits, and the search stays linear in what a model may send."""


class _Action(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Explore(_Action):
    """Look at the code graph: find anchors, read nodes' source, expand nodes' neighbourhood, or rank
    functions by the failing tests' coverage spectrum."""

    type: Literal["explore"] = "explore"
    op: Literal["find", "read", "expand", "coverage", "candidates"] = Field(
        description="find: search anchors; read: source of nodes; expand: k-hop neighbours; coverage: functions "
        "ranked by spectrum-based fault localisation (one coverage run, its own budget); candidates: the edits "
        "planact enumerates for function nodes (token-level, structural inverses, `proposals` statements or "
        "defaults of the module put back), each ready for Repair(edits=[...])."
    )
    anchors: list[Annotated[str, StringConstraints(max_length=MAX_ANCHOR_CHARS)]] = Field(
        default_factory=list, max_length=10, description="find: identifiers, text or traceback frames."
    )
    nodes: list[str] = Field(default_factory=list, max_length=10, description="read / expand: node ids.")
    hop: int = Field(1, ge=1, le=3, description="expand: how many edges out.")
    formula: Literal["ochiai", "dstar"] = Field("ochiai", description="coverage: the SBFL formula.")
    proposals: int = Field(
        0, ge=0, le=MAX_PROPOSALS, description="candidates: repository proposals per function, nearest donors first."
    )


class MemoryOp(_Action):
    """One working-memory edit."""

    op: Literal["add", "remove", "keep"]
    node: str


class Memory(_Action):
    """Edit the working memory (the subgraph the patch model will read)."""

    type: Literal["memory"] = "memory"
    ops: list[MemoryOp] = Field(default_factory=list, max_length=20)


class Edit(_Action):
    """Replace the one occurrence of `old` in `file` by `new`."""

    file: str
    old: str
    new: str


class Repair(_Action):
    """A plan for the target, optionally with a patch (unified diff or edit script) to apply and test."""

    type: Literal["repair"] = "repair"
    apply: bool = Field(True, description="Apply the patch and run the failing tests (one test run).")
    plan: str = Field("", max_length=4000, description="What to change and why (the patch model reads it).")
    target: str = Field("", description="Node id the repair is about.")
    patch: str = Field("", max_length=20000, description="A unified diff against the working copy.")
    edits: list[Edit] = Field(default_factory=list, max_length=20, description="An edit script instead of a diff.")


class Submit(_Action):
    """End the episode: run FAIL_TO_PASS + PASS_TO_PASS; reward 1 only if all pass."""

    type: Literal["submit"] = "submit"


Action = Annotated[Explore | Memory | Repair | Submit, Field(discriminator="type")]
_ADAPTER = TypeAdapter(Action)


class ActionError(ValueError):
    """Model output that is not a valid action; the message is shown to the model."""


MAX_ACTION_CHARS = 1_000_000
"""Longest reply read as an action (20 edits of large functions fit many times over; json reads it in ms)."""


def _json_text(raw: str) -> str | None:
    """The reply's text from its first `{` to its last `}` (what a greedy, DOTALL `{.*}` regex matched, in
    linear time: that regex took time quadratic in a reply of `{`s with no `}`, 12 s for 128,000 of them)."""
    start, end = raw.find("{"), raw.rfind("}")
    return raw[start : end + 1] if start != -1 and end > start else None


def parse_action(raw) -> Explore | Memory | Repair | Submit:
    """A typed action from a dict, an action object or text holding one JSON object (fences allowed)."""
    if isinstance(raw, (Explore, Memory, Repair, Submit)):
        return raw
    if isinstance(raw, str):
        if len(raw) > MAX_ACTION_CHARS:
            raise ActionError(f"the reply is {len(raw)} characters, over the {MAX_ACTION_CHARS} an action may take")
        text = _json_text(raw)
        if text is None:
            raise ActionError("no JSON object found in the reply")
        try:
            raw = json.loads(text)
        except json.JSONDecodeError as e:
            raise ActionError(f"invalid JSON: {e.msg} at position {e.pos}") from None
        except (RecursionError, ValueError) as e:  # nested ~1,000 deep; an int past Python's 4,300 digits
            raise ActionError(f"invalid JSON: {type(e).__name__}: {str(e)[:200]}") from None
    if not isinstance(raw, dict):
        raise ActionError(f"an action is a JSON object, got {type(raw).__name__}")
    try:
        return _ADAPTER.validate_python(raw)
    except ValidationError as e:
        msgs = "; ".join(f"{'.'.join(map(str, err['loc'])) or 'action'}: {err['msg']}" for err in e.errors()[:5])
        raise ActionError(f"invalid action: {msgs}") from None
