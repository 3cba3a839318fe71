"""Where a patch's new code came from, and the rule the repair verdict applies to it.

**Text a model wrote is judged only through the call jail.** A patch has one of three origins:

  model  any text planact did not enumerate itself: a free-form reply, a model's diff or edit script, a
         structural proposal built from a model's line, anything an external caller hands in. The default
         wherever a caller does not say otherwise.
  menu   an edit planact enumerated from the task's own source: a token-level or inverse edit of one of its
         functions (graph_planner.candidates), a statement or default put back from its own module
         (graph_planner.proposals.repository_proposals), or no change at all (`candidates.menu_edit` says
         whether an edit script entry is one).
  gold   the task's own reference fix (how the corpus builder proves a task solvable).

On a task that qualifies for the call jail (`task.jail`) every patch, whatever its origin, runs only in the
jailed child. On any other task a `model` patch is not run at all: it scores 0 with status UNJUDGED, counted
like other refusals and never raised. `menu` and `gold` patches there keep the static path (the patch check,
the runtime guard, the state digest, a confirming run), which holds against a menu planact generated, not
against arbitrary code (docs/code-repair.md, "What the verdict guarantees").
"""

from __future__ import annotations

MODEL, MENU, GOLD = "model", "menu", "gold"
ORIGINS = (MODEL, MENU, GOLD)
UNJUDGED = "unjudged: the task has no call jail"
HOW_TO_JAIL = (
    "qualify tasks for the call jail: `jail: true` in the corpus config (planact-repair corpus), or "
    "`python -m graph_planner.jail_qualify CORPUS` (writes the sidecar CORPUS/jail.json)"
)


def unjudged(task, origin: str) -> bool:
    """True when the verdict must not run a patch of `origin` on `task`: model text on a task without the jail."""
    if origin not in ORIGINS:  # a typo must not silently pick a path
        raise ValueError(f"unknown patch origin {origin!r}: one of {ORIGINS}")
    return origin == MODEL and not task.jail


def unjudged_result(mode: str, tests: list[str], cpu_s: float) -> dict:
    """run_patch's result for a patch it refused to run (reward 0; never cached: it was not judged)."""
    return {
        "mode": mode,
        "status": UNJUDGED,
        "rc": None,
        "seconds": 0.0,
        "passed": 0,
        "failed": sorted(tests)[:20],
        "n_failed": len(tests),
        "cpu_s": cpu_s,
        "unjudged": True,
        "tail": f"text a model wrote is judged only through the call jail, and this task has none ({HOW_TO_JAIL})",
    }
