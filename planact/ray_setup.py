"""A driver's connection to Ray: the configured cluster, or a private local Ray started for this run, with the
environment its workers must share. Every flow that uses agents connects through here."""

from __future__ import annotations

import logging
import os
from typing import Any

import psutil
import ray

from planact.reaper import reap_descendants_on_death
from planact.secrets import expand_references

log = logging.getLogger(__name__)
# Ray waits a fixed 30 s for a new node's raylet to register, then raises this; on a loaded 2-core machine a
# start can miss it once (measured in the test suite), and a second start then succeeds
STARTUP_TIMEOUT = "timed out during startup"


def worker_runtime_env(cfg: Any, env_vars: dict[str, str] | None = None) -> dict | None:
    """The runtime_env for the run's Ray workers: the configured one plus `env_vars` they must share."""
    runtime_env = dict(cfg.ray.runtime_env)
    merged_env = {**(env_vars or {}), **expand_references(runtime_env.pop("env_vars", {}))}
    if cfg.ray.private:
        # A private Ray's workers inherit this process's environment already. A runtime_env with env_vars
        # makes Ray start every worker through an extra interpreter (setup_worker.py): ~2-3 CPU-s a run.
        merged_env = {k: v for k, v in merged_env.items() if os.environ.get(k) != v}
    if merged_env:
        runtime_env["env_vars"] = merged_env
    return runtime_env or None


def connect_ray(cfg: Any, env_vars: dict[str, str] | None = None, namespace: str | None = None) -> bool:
    """Connect to the configured Ray (or start a local one); returns True when this call started it.

    `cfg` is any of the flows' configs: its `ray` section, and `barrier.namespace` unless `namespace` is given."""
    if ray.is_initialized():
        return False
    kwargs: dict[str, Any] = {
        "namespace": namespace or cfg.barrier.namespace,
        "runtime_env": worker_runtime_env(cfg, env_vars),
        "log_to_driver": True,
    }
    if cfg.ray.private:
        # A private single-machine Ray: keep all its traffic on loopback (Ray otherwise binds the primary
        # interface's address even for a one-node cluster).
        os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
        # Long-lived actors count against Ray's soft limit of worker processes (= CPUs); past it, idle task
        # workers are killed after 1 s and every round would pay their multi-second start-up again.
        # No workers started ahead of the first task: a run's actors start their own processes in parallel
        # anyway, and prestarted ones that no actor took (~1 a run) each cost ~2 CPU-s importing Ray.
        kwargs.update(
            address="local",
            include_dashboard=False,
            num_cpus=cfg.ray.num_cpus,
            _system_config={"num_workers_soft_limit": 16, "prestart_worker_first_driver": False},
        )
        # Ray's agents and workers can outlive a SIGKILLed driver; a watchdog process removes them.
        reap_descendants_on_death()
        start_private_ray(kwargs)
    else:
        ray.init(address=cfg.ray.address, **kwargs)
    return True


def start_private_ray(kwargs: dict, attempts: int = 2) -> None:
    """`ray.init(**kwargs)` for a local Ray, started again when the node missed Ray's startup wait; the
    processes the failed start launched are killed first (Ray raises before it keeps a handle on them)."""
    for attempt in range(1, attempts + 1):
        before = {p.pid for p in psutil.Process().children(recursive=True)}
        try:
            ray.init(**kwargs)
            return
        except Exception as e:  # noqa: BLE001 - Ray raises a bare Exception for this
            if STARTUP_TIMEOUT not in str(e) or attempt == attempts:
                raise
            left = [p for p in psutil.Process().children(recursive=True) if p.pid not in before]
            for p in left:
                try:
                    p.kill()
                except psutil.Error:
                    pass
            psutil.wait_procs(left, timeout=10)
            log.warning(
                "the local Ray node %s; starting it again (%d processes of the first start removed)", e, len(left)
            )
