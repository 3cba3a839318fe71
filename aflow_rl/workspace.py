"""AFlow's on-disk layout, read and written exactly (docs/aflow.md).

    workflows/
      template/operator.json           {name: {description, interface}}
      results.json                     [{round, score, avg_cost, total_cost, time}]  one row per validation run
      processed_experience.json        {parent: {score, success: {round: {modification, score}}, failure: {...}}}
      round_N/__init__.py graph.py prompt.py experience.json log.json <score>_<timestamp>.csv

experience.json = {"father node", "modification", "before", "after", "succeed"}. Our own bookkeeping
(the structured edit, validation errors) goes to round_N/planact.json, which AFlow ignores. Every
JSON file is replaced atomically, so an interrupted run leaves either the old or the new file.
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path

from aflow_rl.operators import OPERATOR_DESCRIPTIONS
from planact.storage import atomic_write


def read_json(path: Path, default):
    """A JSON file's content; `default` when it is missing or empty (AFlow ships empty results.json and
    processed_experience.json files and treats them as nothing recorded yet)."""
    if not path.is_file():
        return default
    text = path.read_text()
    return json.loads(text) if text.strip() else default


class Workspace:
    """One benchmark's `workflows` folder."""

    def __init__(self, root: str | Path):
        self.root = Path(root)

    # --- paths ---

    def round_dir(self, r: int) -> Path:
        """round_N folder."""
        return self.root / f"round_{r}"

    def rounds_on_disk(self) -> list[int]:
        """Rounds that have a graph.py, ascending."""
        out = []
        for p in self.root.glob("round_*"):
            suffix = p.name.split("_", 1)[1]
            if suffix.isdigit() and (p / "graph.py").is_file():
                out.append(int(suffix))
        return sorted(out)

    # --- files ---

    def _read(self, name: str, default):
        p = self.root / name
        return read_json(p, default)

    def _write(self, path: Path, data) -> None:
        atomic_write(path, json.dumps(data, indent=4))

    def init(self) -> None:
        """Create the folder and template/operator.json (kept if present)."""
        (self.root / "template").mkdir(parents=True, exist_ok=True)
        op = self.root / "template" / "operator.json"
        if not op.is_file():
            self._write(op, OPERATOR_DESCRIPTIONS)

    def results(self) -> list[dict]:
        """results.json rows."""
        return self._read("results.json", [])

    def append_results(self, rows: list[dict]) -> None:
        """Add validation rows for a round (replacing any earlier rows of that round)."""
        rounds = {r["round"] for r in rows}
        self._write(self.root / "results.json", [r for r in self.results() if r["round"] not in rounds] + rows)

    def processed_experience(self) -> dict:
        """processed_experience.json (keys are parent rounds as strings, as AFlow writes them)."""
        return self._read("processed_experience.json", {})

    def write_round(self, r: int, graph: str, prompt: str, meta: dict | None = None) -> Path:
        """round_N/{__init__.py, graph.py, prompt.py[, planact.json]}."""
        d = self.round_dir(r)
        d.mkdir(parents=True, exist_ok=True)
        (d / "__init__.py").touch()
        atomic_write(d / "graph.py", graph)
        atomic_write(d / "prompt.py", prompt)
        if meta is not None:
            self._write(d / "planact.json", meta)
        return d

    def meta(self, r: int) -> dict:
        """Our bookkeeping for a round ({} for rounds written by AFlow)."""
        p = self.round_dir(r) / "planact.json"
        return read_json(p, {})

    def experience(self, r: int) -> dict | None:
        """round_N/experience.json, or None."""
        p = self.round_dir(r) / "experience.json"
        return read_json(p, None)

    def record_experience(self, r: int, parent: int, modification: str, before: float, after: float) -> dict:
        """Write round_N/experience.json and fold it into processed_experience.json."""
        exp = {
            "father node": parent,
            "modification": modification,
            "before": before,
            "after": after,
            "succeed": after > before,
        }
        self._write(self.round_dir(r) / "experience.json", exp)
        self._fold(r, exp)
        return exp

    def _fold(self, r: int, exp: dict) -> None:
        processed = self.processed_experience()
        node = processed.setdefault(str(exp["father node"]), {"score": exp["before"], "success": {}, "failure": {}})
        node["score"] = exp["before"]
        bucket = "success" if exp["succeed"] else "failure"
        node[bucket][str(r)] = {"modification": exp["modification"], "score": exp["after"]}
        self._write(self.root / "processed_experience.json", processed)

    def rebuild_processed_experience(self) -> dict:
        """Recompute processed_experience.json from every round's experience.json (AFlow's own procedure)."""
        processed: dict = {}
        for r in self.rounds_on_disk():
            exp = self.experience(r)
            if exp:
                node = processed.setdefault(
                    str(exp["father node"]), {"score": exp["before"], "success": {}, "failure": {}}
                )
                node["success" if exp["succeed"] else "failure"][str(r)] = {
                    "modification": exp["modification"],
                    "score": exp["after"],
                }
        self._write(self.root / "processed_experience.json", processed)
        return processed

    # --- derived views ---

    def scores(self) -> dict[int, float]:
        """Mean validation score per evaluated round."""
        by: dict[int, list[float]] = {}
        for row in self.results():
            by.setdefault(int(row["round"]), []).append(float(row["score"]))
        return {r: statistics.fmean(v) for r, v in sorted(by.items())}

    def score_std(self, r: int) -> float:
        """Std of a round's validation runs."""
        vals = [float(x["score"]) for x in self.results() if int(x["round"]) == r]
        return statistics.pstdev(vals) if len(vals) > 1 else 0.0

    def finished(self, r: int) -> bool:
        """A round is finished when it is evaluated and (after round 1) its experience is recorded."""
        return r in self.scores() and (r == 1 or self.experience(r) is not None)

    def tried_modifications(self, parent: int) -> set[str]:
        """Modifications already tried from a parent (for dedupe)."""
        node = self.processed_experience().get(str(parent), {})
        out = {v["modification"] for b in ("success", "failure") for v in node.get(b, {}).values()}
        out |= {x["modification"] for x in self.refusals() if x["parent"] == parent and x["modification"]}
        for r in self.rounds_on_disk():  # rounds written but not yet recorded count too
            m = self.meta(r)
            if m.get("parent") == parent and m.get("modification"):
                out.add(m["modification"])
        return out

    def refusals(self) -> list[dict]:
        """Optimizer outputs refused before evaluation (our refused.json; AFlow keeps no such file)."""
        return self._read("refused.json", [])

    def record_refusal(self, r: int, parent: int | None, modification: str, errors: list[str]) -> None:
        """Remember a refused child so it is neither retried nor lost from the acceptance rate."""
        self._write(
            self.root / "refused.json",
            self.refusals() + [{"round": r, "parent": parent, "modification": modification, "errors": errors}],
        )

    def clear_evaluation(self, r: int) -> None:
        """Drop a half-finished evaluation's CSV/log files (before re-evaluating an interrupted round)."""
        for p in self.round_dir(r).glob("*.csv"):
            p.unlink()
        (self.round_dir(r) / "log.json").unlink(missing_ok=True)
