"""schedulemesh's pure parts: requests, the pool ledger, option checks, dispatch, supervision's silence limit."""

from __future__ import annotations

import pytest

from schedulemesh import resources as R
from schedulemesh.dispatch import Dispatcher
from schedulemesh.errors import InsufficientCapacity, InvalidOptions
from schedulemesh.pool import Pool
from schedulemesh.records import AgentRecord
from schedulemesh.supervision import SupervisionMixin


def test_target_pool_capacity_is_spec_times_target_and_ledger_moves_reserved_to_used():
    pool = Pool("gen", {"role": "actor"}, R.normalize({"cpu": 1, "memory": 512, "zone_a": 0.5}), target_agents=3)
    assert pool.capacity == {"cpu": 3, "memory": 1536, "zone_a": 1.5}
    req = pool.default_request()
    pool.reserve(req)
    assert pool.reserved == req and pool.used == {}
    pool.commit(req)
    assert pool.used == req and pool.reserved == {}
    pool.reserve(req)
    pool.rollback(req)
    assert pool.reserved == {} and pool.free == {"cpu": 2, "memory": 1024, "zone_a": 1.0}
    pool.release(req)
    assert pool.free == pool.capacity


def test_full_pool_names_the_short_resource_and_amount():
    pool = Pool("p", {}, R.normalize({"cpu": 2, "gpu": 1}))
    pool.reserve({"cpu": 1.5})
    with pytest.raises(InsufficientCapacity) as err:
        pool.reserve({"cpu": 1, "gpu": 2})
    msg = str(err.value)
    assert "Insufficient pool 'p' capacity for requested resources" in msg
    assert "cpu short by 0.5 (requested 1, free 0.5)" in msg and "gpu short by 1 (requested 2, free 1)" in msg
    assert pool.reserved == {"cpu": 1.5}  # a refused request leaves the ledger untouched


@pytest.mark.parametrize("bad", [{"cpu": -1}, {"cpu": "many"}, {"": 1}])
def test_malformed_resources_are_rejected(bad):
    with pytest.raises(InvalidOptions):
        R.normalize(bad)


def test_ray_spelling_of_resources():
    opts = R.to_ray_options({"cpu": 0.5, "gpu": 1, "memory": 256, "zone_a": 1})
    assert opts == {"num_cpus": 0.5, "num_gpus": 1, "memory": 256 * 2**20, "resources": {"zone_a": 1}}
    assert R.from_ray({"CPU": 4, "memory": 2**30, "node:127.0.0.1": 1, "zone_a": 2}) == {
        "cpu": 4,
        "memory": 1024,
        "zone_a": 2,
    }


def test_ray_options_unknown_key_and_resource_keys_are_refused_by_name():
    assert R.check_ray_options({"max_restarts": 2, "max_concurrency": 4}) == {"max_restarts": 2, "max_concurrency": 4}
    with pytest.raises(InvalidOptions, match="unknown ray_options key 'max_restart'"):
        R.check_ray_options({"max_restart": 2})
    with pytest.raises(InvalidOptions, match="pass it in resources= as 'cpu'"):
        R.check_ray_options({"num_cpus": 1})
    # The guide's spelling: resource keys in ray_options become part of the request (the ledger sees them).
    opts, request = R.split_ray_options(
        {
            "num_cpus": 2,
            "num_gpus": 1,
            "memory": 512 * 2**20,
            "resources": {"tpu": 1},
            "max_restarts": 3,
            "scheduling_strategy": "SPREAD",
        }
    )
    assert opts == {"max_restarts": 3, "scheduling_strategy": "SPREAD"}
    assert request == {"cpu": 2.0, "gpu": 1.0, "memory": 512.0, "tpu": 1.0}
    with pytest.raises(InvalidOptions, match="NodeAffinitySchedulingStrategy"):
        R.check_ray_options({"scheduling_strategy": "NODE_AFFINITY"})
    with pytest.raises(InvalidOptions, match="lifetime"):
        R.check_ray_options({"lifetime": "forever"})


def test_placement_strategy_needs_a_target_and_a_known_name():
    with pytest.raises(InvalidOptions, match="target_agents >= 1"):
        Pool("p", {}, {"cpu": 1}, placement_strategy="PACK")
    with pytest.raises(InvalidOptions, match="placement_strategy must be one of"):
        Pool("p", {}, {"cpu": 1}, target_agents=2, placement_strategy="TIGHT")
    pool = Pool("p", {}, {"cpu": 1}, target_agents=2, placement_strategy="STRICT_PACK")
    assert [pool.take_bundle("a"), pool.take_bundle("b")] == [0, 1]
    pool.give_bundle("a")
    assert pool.take_bundle("c") == 0


def _agents(*specs):
    return [{"name": n, "load": load, "labels": labels, "namespace": "ns"} for n, load, labels in specs]


def test_dispatch_strategies():
    cands = _agents(("a", 3, {"zone": "x"}), ("b", 0, {"zone": "x"}), ("c", 1, {"zone": "y"}))
    d = Dispatcher(seed=0)
    assert [d.pick(cands, "round_robin")["name"] for _ in range(4)] == ["a", "b", "c", "a"]
    assert d.pick(cands, "least_busy")["name"] == "b"
    assert {d.pick(cands, "random")["name"] for _ in range(50)} == {"a", "b", "c"}
    # power of two never returns the busiest of three (it always loses its pair)
    assert "a" not in {d.pick(cands, "power_of_two")["name"] for _ in range(50)}
    zones = [d.pick(cands, "label_round_robin", label_key="zone")["name"] for _ in range(4)]
    assert zones == ["a", "c", "b", "c"]  # alternate zones x, y; round-robin inside zone x
    # Without label_key the label whose values differ among the candidates (zone) is rotated over.
    inferred = [d.pick(cands, "label_round_robin")["name"] for _ in range(4)]
    assert sorted(inferred) == ["a", "b", "c", "c"]
    with pytest.raises(InvalidOptions, match="unknown strategy"):
        d.pick(cands, "fastest")


def test_an_agent_ray_restarts_itself_gets_a_start_s_worth_of_silence_before_recreation():
    host = SupervisionMixin()
    host.stale_after_s, host.ready_timeout_s = 3.0, 90.0

    def rec(ray_options: dict) -> AgentRecord:
        return AgentRecord("a", "p", object, (), {}, {"cpu": 1.0}, ray_options, {}, "ns")

    # Recreating a silent agent while Ray restarts it would kill the restart in progress.
    assert host._silence_limit(rec({"max_restarts": 1})) == 90.0
    assert host._silence_limit(rec({"max_restarts": -1})) == 90.0
    assert host._silence_limit(rec({"max_restarts": 0})) == 3.0
    assert host._silence_limit(rec({})) == 3.0
