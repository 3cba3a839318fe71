"""The synthetic Plan/Act environment: ground truth, splits, teacher, malformed output."""

import random

from planact.config import EnvConfig
from planact.envs.plan_act import PlanActEnv, execute_plan, parse_plan, verify


def test_operations_and_plan_language():
    assert execute_plan(["inc", "sort"], "391") == "024"
    assert execute_plan(["rev", "rot"], "123") == "213"
    assert execute_plan(["swap"], "1234") == "4231"
    assert parse_plan("inc>sort") == ["inc", "sort"]
    for bad in ("", "inc>>sort", "jump", "inc>sort>rev>rot", "<eos>"):
        assert parse_plan(bad) is None


def test_tasks_are_seeded_and_heldout_is_disjoint():
    env = PlanActEnv(EnvConfig(), seed=3)
    a, b = env.sample_tasks(5), PlanActEnv(EnvConfig(), seed=3).sample_tasks(5)
    assert [t.instruction + t.data for t in a] == [t.instruction + t.data for t in b]
    held = {(t.instruction, t.data) for t in env.heldout}
    for r in range(20):
        assert not held & {(t.instruction, t.data) for t in env.sample_tasks(r)}
    for t in a:
        assert execute_plan(list(t.ops), t.data) == t.answer


def test_but_first_instruction_orders_the_plan():
    env = PlanActEnv(EnvConfig(min_ops=2, max_ops=2, but_first_prob=1.0), seed=0)
    t = env.sample_tasks(0, 1)[0]
    assert t.but_first and ", but first " in t.instruction


def test_teacher_is_wrong_on_but_first_at_the_configured_rate():
    env = PlanActEnv(EnvConfig(min_ops=2, max_ops=2, but_first_prob=1.0, teacher_order_error=0.7), seed=0)
    rng = random.Random(0)
    tasks = env.sample_tasks(0, 2000)
    wrong = sum(env.teacher_plan(t, rng) != ">".join(t.ops) for t in tasks if t.ops[0] != t.ops[1])
    distinct = sum(t.ops[0] != t.ops[1] for t in tasks)
    assert abs(wrong / distinct - 0.7) < 0.05


def test_malformed_outputs_score_zero_and_never_raise():
    task = {"data": "123", "answer": "234", "ops": ["inc"]}
    assert verify(task, "inc", "234").outcome == 1.0
    # (outcome, fidelity, plan_valid, answer_valid): a right answer under a bad plan keeps its outcome (the
    # planner's reward is gated separately), but earns no fidelity; malformed answers are flagged, never raised.
    expected = {
        ("garbage", "234"): (1.0, 0.0, False, True),
        (None, "234"): (1.0, 0.0, False, True),
        ("inc", "23x"): (0.0, 0.0, True, False),
        ("inc", ""): (0.0, 0.0, True, False),
        ("inc", "2345"): (0.0, 0.0, True, False),
        ("", None): (0.0, 0.0, False, False),
    }
    for (plan, answer), want in expected.items():
        v = verify(task, plan, answer)
        assert (v.outcome, v.fidelity, v.plan_valid, v.answer_valid) == want, (plan, answer)
    v = verify(task, "garbage", "99")
    assert (v.outcome, v.plan_valid, v.answer_valid) == (0.0, False, False)
