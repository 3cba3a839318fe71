"""schedulemesh's task queue and preemption rules, on a fake clock (no Ray)."""

from __future__ import annotations

import pytest

from schedulemesh import InvalidOptions
from schedulemesh.queue import PreemptionPolicy, TaskQueue


class Clock:
    def __init__(self):
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def test_priority_order_fifo_among_equals_and_per_pool_queues():
    clock = Clock()
    q = TaskQueue(aging_per_s=0.0, clock=clock)
    for name, prio in (("low", 0), ("high", 5), ("mid", 2), ("high-2", 5)):
        q.submit("gen", name, priority=prio, task_id=name)
    q.submit("other", "x", priority=100)
    assert [t["task_id"] for t in q.pending("gen")] == ["high", "high-2", "mid", "low"]
    order = [q.choose("gen", agent="a")["task_id"] for _ in range(4)]
    assert order == ["high", "high-2", "mid", "low"] and q.choose("gen") is None  # "other" never leaks in
    with pytest.raises(InvalidOptions, match="already running"):
        q.submit("gen", priority=1, task_id="high")


def test_aging_lets_a_waiting_low_priority_task_overtake_new_high_ones():
    clock = Clock()
    q = TaskQueue(aging_per_s=0.5, clock=clock)
    q.submit("gen", priority=0, task_id="old-low")
    clock.t += 12.0  # waited 12 s: effective priority 6
    q.submit("gen", priority=5, task_id="new-high")
    assert [t["task_id"] for t in q.pending("gen")] == ["old-low", "new-high"]
    assert q.choose("gen")["effective_priority"] == pytest.approx(6.0)


def test_requeued_task_keeps_its_age():
    clock = Clock()
    q = TaskQueue(aging_per_s=1.0, clock=clock)
    q.submit("gen", priority=0, task_id="a")
    q.choose("gen", agent="w1")
    clock.t += 10
    q.requeue("a")
    q.submit("gen", priority=5, task_id="b")
    assert q.pending("gen")[0]["task_id"] == "a"  # 0 + 10 s of aging beats a fresh 5


def test_a_snapshot_restores_order_ages_and_ids():
    clock = Clock()
    q = TaskQueue(aging_per_s=1.0, clock=clock)
    q.submit("gen", "a", priority=0, task_id="a")
    q.submit("gen", "b", priority=3)
    q.submit("gen", "c", priority=9, task_id="c")
    q.choose("gen", agent="w")  # c runs
    q.complete(q.choose("gen", agent="w")["task_id"])  # b done: not kept
    clock.t += 5
    again = TaskQueue(aging_per_s=1.0, clock=clock)
    again.restore(q.snapshot())
    assert [t["task_id"] for t in again.running()] == ["c"]
    assert [(t["task_id"], t["effective_priority"]) for t in again.pending("gen")] == [("a", 5.0)]
    assert again.submit("gen") == "gen:3"  # ids continue where the saved queue stopped


def test_preemption_needs_the_gap_respects_labels_and_picks_the_cheapest_victim():
    clock = Clock()
    q = TaskQueue(aging_per_s=0.0, clock=clock)
    for tid, prio, labels in (
        ("batch-1", 1, {"kind": "batch"}),
        ("batch-2", 1, {"kind": "batch"}),
        ("critical", 0, {"tier": "critical"}),
    ):
        q.submit("gen", priority=prio, labels=labels, task_id=tid)
        q.choose("gen", agent=f"agent-{tid}")
        clock.t += 1
    policy = PreemptionPolicy(min_priority_gap=3, protected={"tier": "critical"})
    q.submit("gen", priority=3, task_id="urgent-small")
    assert policy.victim(q.pending("gen")[0], q.running("gen")) is None  # 3 - 1 < gap; critical is protected
    q.submit("gen", priority=9, task_id="urgent")
    victim = policy.victim(q.pending("gen")[0], q.running("gen"))
    assert victim["task_id"] == "batch-2"  # lowest priority, most recently started (least work lost)
    only_batch = PreemptionPolicy(min_priority_gap=1, preemptible={"kind": "interactive"})
    assert only_batch.victim(q.pending("gen")[0], q.running("gen")) is None


def pick_highest_gpu_memory(candidates, rng):
    """A custom strategy for the YAML test: the agent reporting the most free GPU memory."""
    return max(candidates, key=lambda a: a["report"].get("gpu_free_mb", 0))


def test_strategies_registered_from_yaml_are_choosable(tmp_path):
    from schedulemesh.dispatch import CUSTOM, Dispatcher, load_strategies, register_strategy

    spec = tmp_path / "strategies.yaml"
    spec.write_text("strategies:\n  most_free_gpu: tests.unit.test_schedulemesh_queue:pick_highest_gpu_memory\n")
    try:
        assert load_strategies(spec) == ["most_free_gpu"]
        cands = [
            {"name": n, "labels": {}, "load": 0.0, "report": {"gpu_free_mb": m}} for n, m in (("a", 10), ("b", 80))
        ]
        assert Dispatcher(seed=0).pick(cands, "most_free_gpu")["name"] == "b"
        with pytest.raises(InvalidOptions, match="built in"):
            register_strategy("round_robin", pick_highest_gpu_memory)
        spec.write_text("strategies:\n  broken: no.such.module:fn\n")
        with pytest.raises(InvalidOptions, match="strategies.broken: cannot load"):
            load_strategies(spec)
        register_strategy("wrong", lambda candidates, rng: {"name": "stranger"})
        with pytest.raises(InvalidOptions, match="not one of its candidates"):
            Dispatcher().pick(cands, "wrong")
    finally:
        CUSTOM.clear()
