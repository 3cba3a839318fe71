"""The durable experience pool: SIGKILLed writers lose nothing acknowledged; concurrent writers lose nothing.

Real processes, real fsync, a real Ray actor (whose process the test kills mid-stream).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import ray

from planact.experience import ExperienceStore, PoolRef, pool_actor

from .conftest import LOOPBACK_RAY

WRITER = str(Path(__file__).with_name("pool_writer.py"))


def _writer(path, name, count, batch=1) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    return subprocess.Popen(
        [sys.executable, WRITER, str(path), name, str(count), str(batch)], stdout=subprocess.PIPE, text=True, env=env
    )


def test_sigkilled_writer_loses_nothing_it_acknowledged(tmp_path):
    proc = _writer(tmp_path, "w", 100000)
    acked: list[str] = []
    for line in proc.stdout:
        acked += line.split()
        if len(acked) >= 300:
            break
    proc.send_signal(signal.SIGKILL)  # mid-stream: the next append is being written right now
    acked += proc.stdout.read().split()  # anything it printed before dying was acknowledged too
    proc.wait()
    fresh = ExperienceStore(tmp_path)
    have = {it["id"] for it in fresh.query(run="w")}
    assert set(acked) <= have, f"{len(set(acked) - have)} acknowledged items lost"
    # The pool stays writable: a torn tail (if the kill cut a line) is cut off, not glued to the next item.
    fresh.append([{"id": "after-kill", "run": "w2"}])
    again = ExperienceStore(tmp_path)
    assert again.query(run="w2")[0]["id"] == "after-kill" and set(acked) <= {it["id"] for it in again.query(run="w")}


def test_eight_concurrent_writer_processes_lose_nothing(tmp_path):
    procs = [_writer(tmp_path, f"w{k}", 120, batch=3) for k in range(8)]
    outs = [p.communicate(timeout=120)[0] for p in procs]
    assert all(p.returncode == 0 for p in procs)
    acked = {i for out in outs for i in out.split()}
    store = ExperienceStore(tmp_path)
    assert len(acked) == 960 and {it["id"] for it in store.query()} == acked
    stats = store.stats()
    assert stats["items"] == 960 and stats["torn_lines"] == 0 and len(stats["by_run"]) == 8


@pytest.fixture(scope="module")
def local_ray():
    os.environ.update(LOOPBACK_RAY)
    ray.init(address="local", num_cpus=4, include_dashboard=False, namespace="pool-tests")
    yield
    ray.shutdown()


def test_pool_actor_killed_mid_stream_keeps_every_acknowledged_item(local_ray, tmp_path):
    pool = PoolRef(tmp_path / "pool", "pool-under-test", "pool-tests")
    actor = pool_actor(pool.path, pool.name, pool.namespace)
    pid = ray.get(actor.pid.remote())

    @ray.remote(num_cpus=0.1)
    def write(writer: str, n: int) -> list[str]:
        done = []
        for i in range(n):
            item = {"id": f"{writer}/{i}", "run": writer, "round": i, "role": "actor", "data": "y" * 500}
            try:
                pool.append([item])
            except ray.exceptions.RayActorError:
                continue  # this append was in flight when the actor died: not acknowledged
            done.append(item["id"])
        return done

    futures = [write.remote(f"t{k}", 150) for k in range(8)]
    watcher = ExperienceStore(tmp_path / "pool")
    while len(watcher) < 300:  # kill the pool's process once the writers are well under way
        time.sleep(0.01)
        watcher.refresh()
    os.kill(pid, signal.SIGKILL)
    acked = [i for ids in ray.get(futures, timeout=240) for i in ids]
    assert ray.get(pool.handle().pid.remote()) != pid  # the actor was restarted and served the rest
    have = {it["id"] for it in ExperienceStore(tmp_path / "pool").query()}
    assert set(acked) <= have, f"{len(set(acked) - have)} acknowledged items lost"
    assert len(acked) > 8 * 100 and len(have) > 300  # most writes went through, before and after the kill
    # Query, sample and stats answer through the actor. Compared with what the file holds, not with what
    # was acknowledged: an append whose reply was lost in the kill may still have been made durable.
    assert len(pool.query(run="t3")) == len([i for i in have if i.startswith("t3/")])
    assert len(pool.sample(5, by="priority")) == 5
    assert pool.stats()["items"] == len(have)
