"""RoundBatch: the typed round of samples, and its one conversion to and from the experience pool's items."""

from __future__ import annotations

import json
import pickle

import pytest

from planact.batch import RoundBatch, pool_item
from planact.experience import ExperienceStore
from planact.samples import Sample


def _sample(role: str, task: str, adv: float, version: int = 3) -> Sample:
    return {
        "role": role,
        "task_id": task,
        "group": f"{task}/0" if role == "actor" else task,
        "prompt_ids": [1, 2],
        "token_ids": [5, 6, 2],
        "logprobs": [-0.1, -0.2, -0.3],
        "weight_version": version,
        "reward": 1.0,
        "advantage": adv,
        "finish_reason": "stop",
    }


def _batch() -> RoundBatch:
    return RoundBatch(
        4,
        {
            "planner": [_sample("planner", "t1", 0.5), _sample("planner", "t2", -0.5, 2)],
            "actor": [_sample("actor", "t1", 1.0), _sample("actor", "t1", 0.0), _sample("actor", "t2", -1.0)],
        },
    )


def test_batch_views_and_counts():
    b = _batch()
    assert b.roles == ["planner", "actor"] and b.counts() == {"planner": 2, "actor": 3} and len(b) == 5
    assert b.task_ids("actor") == ["t1", "t2"] and b.weight_versions("planner") == [2, 3]
    assert b.samples("critic") == [] and RoundBatch(1, {"planner": []}).roles == []
    only = b.only("actor")
    assert only.round == 4 and only.roles == ["actor"] and only.samples("actor") == b.samples("actor")


def test_batch_is_frozen_and_owns_its_lists():
    samples = [_sample("actor", "t1", 1.0)]
    b = RoundBatch(0, {"actor": samples})
    samples.append(_sample("actor", "t2", 0.0))  # the producer's list, changed after the hand-over
    b.samples("actor").clear()  # a reader's copy
    assert b.counts() == {"actor": 1}
    with pytest.raises(AttributeError):
        b.round = 1  # type: ignore[misc]
    with pytest.raises(TypeError):
        b.by_role["actor"] = []  # type: ignore[index]


def test_batch_pickles_as_ray_and_prefect_carry_it():
    b = _batch()
    again = pickle.loads(pickle.dumps(b))
    assert again == b and again.counts() == b.counts()


def _old_experience_items(run, round_idx, role, samples, anchor_key="group"):
    # The pool items as planact.experience.experience_items wrote them before RoundBatch (commit 9b17238).
    return [
        {
            "id": f"{run}/{round_idx}/{role}/{i}",
            "run": run,
            "round": round_idx,
            "role": role,
            "anchor": s.get(anchor_key),
            "priority": 1.0 + abs(float(s.get("advantage", 0.0))),
            "data": s,
        }
        for i, s in enumerate(samples)
    ]


def test_items_keep_the_pools_layout():
    b = _batch()
    old = [it for role in b.roles for it in _old_experience_items("run", 4, role, b.samples(role))]
    # Same items, same key order: the JSON lines are byte for byte what older code wrote (and reads).
    assert [json.dumps(it) for it in b.items("run")] == [json.dumps(it) for it in old]


def test_round_trip_through_the_store(tmp_path):
    b = _batch()
    store = ExperienceStore(tmp_path)
    store.append(b.items("run"))
    store.append(RoundBatch(5, {"actor": [_sample("actor", "t9", 0.0)]}).items("run"))
    back = RoundBatch.from_items(ExperienceStore(tmp_path).query(run="run", round=4))
    assert back == b and sorted(back.roles) == ["actor", "planner"]  # the pool orders roles by id
    with pytest.raises(ValueError, match="one round"):
        RoundBatch.from_items(store.query(run="run"))


def test_reads_a_pool_written_by_the_old_code(tmp_path):
    b = _batch()
    # A pool file as the old code left it: one line per appended batch, with the store's ts/priority fields.
    (tmp_path / "pool.jsonl").write_text(
        json.dumps(
            {
                "items": [
                    {"ts": 1.0, "priority": 1.0, **it}
                    for role in ("planner", "actor")
                    for it in _old_experience_items("old", 4, role, b.samples(role))
                ]
            }
        )
        + "\n"
    )
    back = RoundBatch.from_items(ExperienceStore(tmp_path).query(run="old", round=4))
    assert back == b


def test_from_items_orders_samples_by_their_index_not_append_time():
    b = _batch()
    items = b.items("run")
    shuffled = [items[1], items[0], *items[2:][::-1]]  # a partly re-run round: appended out of order
    assert RoundBatch.from_items(shuffled).samples("actor") == b.samples("actor")


def test_pool_item_extra_fields_and_priority():
    it = pool_item("r/1/s/2", "r", 1, "aflow-optimizer", "a", None, {"x": 1}, benchmark="b")
    assert it["priority"] == 1.0 and it["benchmark"] == "b" and it["data"] == {"x": 1}
    assert pool_item("i", "r", 1, "actor", None, -2.5, {})["priority"] == 3.5
