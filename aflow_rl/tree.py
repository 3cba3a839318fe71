"""The search tree of a workspace: edges from experience, drawn as a PNG and written as Graphviz DOT."""

from __future__ import annotations

from pathlib import Path

from aflow_rl.workspace import Workspace


def tree(ws: Workspace) -> dict[int, list[int]]:
    """parent round -> child rounds, from the rounds' recorded parents."""
    children: dict[int, list[int]] = {}
    for r in ws.rounds_on_disk():
        parent = (ws.experience(r) or {}).get("father node", ws.meta(r).get("parent"))
        if parent is not None:
            children.setdefault(int(parent), []).append(r)
    return children


def to_dot(ws: Workspace) -> str:
    """Graphviz text: one node per round with its score, one edge per expansion labelled by its modification."""
    scores = ws.scores()
    lines = ["digraph aflow {", "  node [shape=box];"]
    for r in ws.rounds_on_disk():
        lines.append(f'  r{r} [label="round {r}\\n{scores.get(r, float("nan")):.3f}"];')
    for parent, kids in tree(ws).items():
        for k in kids:
            mod = ((ws.experience(k) or {}).get("modification") or ws.meta(k).get("modification", ""))[:60].replace(
                '"', "'"
            )
            lines.append(f'  r{parent} -> r{k} [label="{mod}"];')
    return "\n".join(lines + ["}"]) + "\n"


def draw(ws: Workspace, out_png: str | Path, best: int | None = None) -> Path:
    """A tidy top-down drawing of the tree, nodes coloured by validation score, the best one outlined."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    scores, kids = ws.scores(), tree(ws)
    pos: dict[int, tuple[float, float]] = {}
    next_x = [0.0]

    def place(node: int, depth: int) -> float:
        xs = [place(c, depth + 1) for c in sorted(kids.get(node, []))]
        x = sum(xs) / len(xs) if xs else next_x[0]
        if not xs:
            next_x[0] += 1.0
        pos[node] = (x, -depth)
        return x

    roots = [r for r in ws.rounds_on_disk() if all(r not in v for v in kids.values())]
    for root in roots:
        place(root, 0)
    fig, ax = plt.subplots(
        figsize=(max(4, 0.9 * next_x[0] + 2), 1.3 * (1 + max((-y for _, y in pos.values()), default=0)) + 1)
    )
    for parent, cs in kids.items():
        for c in cs:
            if parent in pos and c in pos:
                ax.plot([pos[parent][0], pos[c][0]], [pos[parent][1], pos[c][1]], color="#999", zorder=1)
    cmap = plt.get_cmap("viridis")
    for r, (x, y) in pos.items():
        s = scores.get(r)
        ax.scatter(
            [x],
            [y],
            s=500,
            color=cmap(s if s is not None else 0.0),
            edgecolors="red" if r == best else "black",
            linewidths=3 if r == best else 1,
            zorder=2,
        )
        ax.annotate(
            f"{r}\n{s:.2f}" if s is not None else f"{r}\n-",
            (x, y),
            ha="center",
            va="center",
            fontsize=7,
            color="white",
            zorder=3,
        )
    ax.set_axis_off()
    ax.set_title("AFlow search tree (round / validation score; best outlined)")
    out = Path(out_png)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=90, bbox_inches="tight")
    plt.close(fig)
    return out
