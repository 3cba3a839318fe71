"""Spectrum-based fault localisation (SBFL) over the functions the tests call.

A function that the failing tests run and the passing tests mostly do not is suspicious. With, per
function, ef / ep = failing / passing tests that call it and F = all failing tests:

  Ochiai (Abreu et al. 2007)   ef / sqrt(F * (ef + ep))
  DStar  (Wong et al. 2014)    ef^2 / (ep + F - ef)          (star = 2, the paper's usual choice)

The spectrum comes from one coverage run (the corpus's per-test call recorder) of the failing tests'
modules on the unpatched base commit. Ties, frequent with few tests, are broken by the traceback of that
run (innermost frame first) and then by nearness to the failing tests in the code graph, so that every
agent gets one ranking from three sources of evidence.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

FORMULAS = ("ochiai", "dstar")
DSTAR_FLOOR = 0.5
"""DStar's denominator when a function is run by every failing test and no passing one (0 in the paper's
formula): the score stays finite, and above every function with a non-zero denominator and the same ef."""


def ochiai(ef: int, ep: int, failed: int) -> float:
    """Ochiai suspiciousness: 1 for a function run by all failing tests and no passing one, 0 if no failing one."""
    return ef / math.sqrt(failed * (ef + ep)) if ef and failed else 0.0


def dstar(ef: int, ep: int, failed: int, star: int = 2) -> float:
    """DStar suspiciousness (star 2); unbounded above, 0 for a function no failing test runs."""
    if not ef:
        return 0.0
    return ef**star / max(DSTAR_FLOOR, ep + failed - ef)


def spectrum(
    calls: dict[str, Iterable[str]], failed: set[str], passed: set[str], always: Iterable[str] = ()
) -> dict[str, tuple[int, int]]:
    """(ef, ep) per function from test id -> functions it called; `always` ran for every test (import time)."""
    counts: dict[str, list[int]] = {}
    for test, functions in calls.items():
        slot = 0 if test in failed else 1 if test in passed else None
        if slot is None:  # skipped, or not a test of this run
            continue
        for fn in set(functions):
            counts.setdefault(fn, [0, 0])[slot] += 1
    for fn in always:
        counts[fn] = [len(failed), len(passed)]
    return {fn: (ef, ep) for fn, (ef, ep) in counts.items()}


def suspiciousness(spectra: dict[str, tuple[int, int]], failed: int, formula: str = "ochiai") -> dict[str, float]:
    """Score of every function in the spectrum by `formula` ('ochiai' or 'dstar')."""
    if formula not in FORMULAS:
        raise ValueError(f"unknown SBFL formula {formula!r}: one of {FORMULAS}")
    score = ochiai if formula == "ochiai" else dstar
    return {fn: score(ef, ep, failed) for fn, (ef, ep) in spectra.items()}


def rank(
    scores: dict[str, float], tiebreak: Iterable[dict[str, float]] = (), limit: int | None = None
) -> list[tuple[str, float]]:
    """Functions with a positive score, best first; equal scores ordered by each tiebreak map in turn."""
    breaks = list(tiebreak)

    def key(fn: str) -> tuple:
        # Rounded: Ochiai's square root makes equal spectra differ in the last bits across platforms.
        return (-round(scores[fn], 9), *(-b.get(fn, 0.0) for b in breaks), fn)

    ranked = sorted((fn for fn, s in scores.items() if s > 0), key=key)
    return [(fn, scores[fn]) for fn in ranked[:limit]]
