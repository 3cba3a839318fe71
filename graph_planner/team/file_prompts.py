"""What a pretrained planner and patch model read and choose among (env.repair.prompt_style: file).

A model pretrained on code ranks candidate fixes by how natural the fixed code reads in its file, and
knows what function names mean. So the patch model's prompt is the module's own text before the
target function (plain text to continue, no chat turn) and each option is the whole function as one
candidate edit leaves it: the option the model finds most likely there is the fix it proposes. The
planner gets a question in words, the offered functions by name, and answers `read <name>` or
`repair <name>`. The same candidate sets and the same Submit as the compact prompts of tiny models.
"""

from __future__ import annotations

from graph_planner.team.context import NodeView, TaskContext
from graph_planner.team.prompts import short


def function_names(ctx: TaskContext) -> list[str]:
    """How the planner names the offered functions: `Cls.method`, with its file where a name repeats."""
    names = [short(v.node) for v in ctx.nodes]
    return [f"{v.file}:{n}" if names.count(n) > 1 else n for n, v in zip(names, ctx.nodes)]


def _excerpt(view: NodeView, lines: int = 12) -> str:
    src = view.source.splitlines()
    more = "\n    ..." if len(src) > lines else ""
    return "\n".join(src[:lines]) + more


def listing_order(ctx: TaskContext, levels: list[int] | None) -> list[int]:
    """The offered functions most likely first: a candidate edit on a traced line, then any candidate edit,
    then the rest, each kind in the localisation's order (what the rule agent tries first)."""
    if levels is None:
        return list(range(len(ctx.nodes)))
    return sorted(range(len(ctx.nodes)), key=lambda i: (-levels[i], i))


def planner_question(ctx: TaskContext, read: list[str], levels: list[int] | None = None) -> str:
    """The planner's chat prompt: the failure, the offered functions by name, and what it has read."""
    test = ctx.failing[0].split("::")[-1] if ctx.failing else "a test"
    names = function_names(ctx)
    offered = []
    for i in listing_order(ctx, levels):
        view, level = ctx.nodes[i], (levels[i] if levels is not None else None)
        notes = ["on the traceback"] if view.trace_lines else []
        if level == 2:
            notes.append("a traced line can be edited")
        elif level == 0:
            notes.append("no candidate edit")
        offered.append(f"- {names[i]}" + (f" ({', '.join(notes)})" if notes else ""))
    seen = "".join(
        f"\n\nYou read {name}:\n```python\n{_excerpt(v)}\n```" for name, v in zip(names, ctx.nodes) if v.node in read
    )
    return (
        f"The test {test} fails with: {ctx.error[:160]}\nThe functions it may involve, most likely first:\n"
        + "\n".join(offered)
        + seen
        + "\n\nWhich function do you read next, or repair? Answer `read <function>` or `repair <function>`."
    )


def planner_choices(ctx: TaskContext, read: list[str], reads_left: int) -> list[tuple[str, str, str]]:
    """(text, action, node) the planner may answer now: read an unread function, or repair a read one."""
    names = function_names(ctx)
    out = []
    if reads_left > 0:
        out += [(f"read {n}", "read", v.node) for n, v in zip(names, ctx.nodes) if v.node not in read]
    out += [(f"repair {n}", "repair", v.node) for n, v in zip(names, ctx.nodes) if v.node in read]
    return out


def teacher_answers(ctx: TaskContext, k: int, levels: list[int] | None = None) -> list[tuple[str, str]]:
    """The imperfect teacher's episode in this style: read the k-th offered function, then repair it."""
    node, name = ctx.nodes[k].node, function_names(ctx)[k]
    return [
        (planner_question(ctx, [], levels), f"read {name}"),
        (planner_question(ctx, [node], levels), f"repair {name}"),
    ]


def file_context(file_text: str, first_line: int, max_chars: int) -> str:
    """The module's text before line `first_line`: its last `max_chars` characters, cut at a line start."""
    before = "".join(file_text.splitlines(True)[: first_line - 1])
    if len(before) <= max_chars:
        return before
    cut = before[-max_chars:]
    return cut[cut.find("\n") + 1 :] if "\n" in cut else cut


def edited_functions(view: NodeView) -> tuple[list[str], list]:
    """Each candidate edit as the whole function it leaves (the patch model's options), and the edits."""
    cands = view.candidates()
    return [c.edit["new"] for c in cands], cands
