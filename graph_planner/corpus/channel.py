"""The verdict channel of a test run: the signed per-test report the host reads from its own pipe, the
canary tests a confirming run carries, and whether a report can be believed (graph_planner/corpus/testrun.py
starts the run; plugin/planact_boot.py writes the report).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import random
import secrets
from dataclasses import dataclass, field
from pathlib import Path

UNSIGNED = "a report line the host's plugin did not sign"
CHANNEL_BYTES = 32 << 20  # outcome lines of the largest suites (~100 bytes per test phase)


@dataclass
class Report:
    """What the signed channel said: per-test outcomes and seconds, their order, the end line, problems."""

    outcomes: dict[str, str] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)
    order: list[str] = field(default_factory=list)
    end: dict | None = None
    problem: str = ""
    failed_phases: int = 0
    guard: tuple[str, str] | None = None
    record: dict[str, list[str]] = field(default_factory=dict)
    digests: list[tuple[str, dict[str, str | None]]] = field(default_factory=list)
    digest_s: float = 0.0
    jail: str = ""


def _signed(text: str, key: bytes):
    """The rows of the lines signed with `key` in sequence, and the first problem (an unsigned line)."""
    rows, problem, seq = [], "", 0
    for line in text.splitlines():
        mac, _, body = line.partition(" ")
        want = hmac.new(key, f"{seq}:{body}".encode(), hashlib.sha256).hexdigest()[:32]
        if not hmac.compare_digest(mac, want):
            problem = problem or UNSIGNED
            continue
        seq += 1
        try:
            row = json.loads(body)
        except ValueError:
            row = None
        if not isinstance(row, dict):
            problem = problem or "an unreadable report line"
            continue
        rows.append(row)
    return rows, problem


def read_channel(text: str, key: bytes) -> Report:
    """The report in the boot script's signed lines. A test passed when its call phase passed and no
    phase failed; skipped when a phase was skipped. pytest counts a failure per failed phase (a test may
    fail its call and its teardown), and the cross-check compares like with like."""
    rows, problem = _signed(text, key)
    out = Report(problem=problem)
    phases: dict[str, dict[str, str]] = {}
    for row in rows:
        if out.end is not None:
            out.problem = out.problem or "report lines after the end of the session"
        elif "end" in row:
            out.end = row
        elif "guard" in row:
            out.guard = (str(row["guard"]), str(row.get("in")))
        elif "jail" in row:
            out.jail = str(row["jail"])
        elif "record" in row:
            out.record = {str(k): list(v) for k, v in dict(row["record"]).items()}
        elif "digest" in row:
            out.digests.append((str(row["digest"]), {str(k): v and str(v) for k, v in dict(row["d"]).items()}))
            out.digest_s += float(row.get("s") or 0.0)
        elif "id" in row and row.get("sub"):
            # a subTest: several per test under its id; a failed one fails the test (and counts, as pytest does)
            seen = phases.setdefault(str(row["id"]), {})
            if row.get("outcome") == "failed":
                seen["sub"] = "failed"
                out.failed_phases += 1
        elif "id" in row:
            seen = phases.setdefault(str(row["id"]), {})
            if row.get("when") in seen:
                out.problem = out.problem or f"{row['id']} reported twice"
            seen[str(row.get("when"))] = str(row.get("outcome"))
            out.seconds[str(row["id"])] = out.seconds.get(str(row["id"]), 0.0) + float(row.get("s") or 0.0)
    out.failed_phases += sum(sum(o == "failed" for w, o in seen.items() if w != "sub") for seen in phases.values())
    for test, seen in phases.items():
        if "failed" in seen.values():
            out.outcomes[test] = "failed"
        elif "skipped" in seen.values():
            out.outcomes[test] = "skipped"
        else:
            out.outcomes[test] = "passed" if seen.get("call") == "passed" else "failed"
    out.order = list(phases)
    return out


def canaries(folder: Path, tests: list[str]) -> tuple[list[str], dict[str, str]]:
    """`tests` with canary test files (outside the working copy, bound read-only) the host writes with values
    only it knows: one that must fail and one that must pass at random places, and one that must fail last
    (a forger that starts partway through the run is still active then); (the argument list, id suffix ->
    the outcome it must have)."""
    named, expect = list(tests), {}
    for i, want in enumerate(("failed", "passed", "failed")):
        name, a = f"test_{secrets.token_hex(6)}", secrets.token_hex(12)
        b = a if want == "passed" else secrets.token_hex(12)
        path = folder / f"{name}.py"
        path.write_text(f"def {name}():\n    assert {a!r} == {b!r}\n")
        named.insert(len(named) if i == 2 else random.randint(0, len(named)), str(path))
        expect[f"::{name}"] = want
    return named, expect


def tampering(report: Report, rc: int | None, canaries: dict[str, str]) -> str:
    """Why a run's report of a passed test cannot be believed ("" when everything agrees): a problem of the
    signed lines, a canary (test id -> the outcome it must have) reported otherwise, or pytest's exit status
    other than 0 exactly when no phase failed."""
    if report.problem:
        return report.problem
    for test, want in canaries.items():
        seen = report.outcomes.get(test, "missing")
        if seen != want:
            return f"the host's must-{'pass' if want == 'passed' else 'fail'} test was reported {seen}"
    if report.end is None:
        return "the session's end was never reported"
    expected = 0 if report.failed_phases == 0 else 1
    if report.end.get("end") != rc or rc != expected:
        return f"pytest's exit status disagrees (reported {report.end.get('end')}, process {rc}, expected {expected})"
    if report.end.get("failed") != report.failed_phases:
        return "pytest's failure count disagrees with the reported outcomes"
    return ""
