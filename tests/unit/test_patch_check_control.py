"""A patch that steers a gadget by control flow alone is refused (cases in patch_control_cases.py)."""

from __future__ import annotations

import pytest

from graph_planner.patch_check import screen

from .patch_control_cases import ACCEPTED_TODAY, CASES


@pytest.mark.parametrize("name,old,new", CASES, ids=[c[0].split()[0] for c in CASES])
def test_a_gadget_steered_through_control_flow_is_refused(name, old, new):
    compile(new, name, "exec")  # each attack is valid Python: a refusal is the check's, not the parser's
    assert bool(screen(old, new)) == (name.split()[0] not in ACCEPTED_TODAY), name


def test_the_honest_control_an_unrelated_fix_beside_the_same_gadget_is_accepted():
    old = "def f(o, a, n):\n    name = a.x\n    total = n - 1\n    return getattr(o, name), total\n"
    assert screen(old, old.replace("n - 1", "n + 1")) == []
