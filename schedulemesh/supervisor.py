"""The supervisor: a detached, named async actor that owns pools, creates agents and keeps them alive.

It is the single writer of pool ledgers (so concurrent create_agent calls cannot oversubscribe a
pool), the owner of every agent actor (so agents outlive the driver that asked for them), and the
keeper of the state file a restarted supervisor recovers from.
"""

from __future__ import annotations

import asyncio
import logging
import time

import ray
from ray.exceptions import GetTimeoutError
from ray.util.placement_group import (
    PlacementGroup,
    placement_group,
    remove_placement_group,
)
from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

from schedulemesh import resources as R
from schedulemesh.agent import managed
from schedulemesh.errors import (
    AgentCreationError,
    AgentNotFound,
    AlreadyExists,
    InsufficientCapacity,
    InvalidOptions,
    PoolNotFound,
)
from schedulemesh.pool import Pool
from schedulemesh.queue import PreemptionPolicy, TaskQueue
from schedulemesh.queueing import QueueingMixin
from schedulemesh.records import AgentRecord, load_state, save_state
from schedulemesh.recovery import RecoveryMixin
from schedulemesh.supervision import SupervisionMixin

log = logging.getLogger("schedulemesh")


def _node_totals(node_labels: dict[str, str]) -> list[dict[str, float]]:
    """Total resources of each alive node whose labels match."""
    out = []
    for node in ray.nodes():
        labels = node.get("Labels") or {}
        if node.get("Alive") and all(labels.get(k) == v for k, v in node_labels.items()):
            out.append(R.from_ray(node.get("Resources", {})))
    return out


def _root_cause(exc: BaseException) -> str:
    """'RuntimeError: msg' from Ray's wrapped creation-task error (its last traceback line)."""
    lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
    return lines[-1] if lines else type(exc).__name__


class Supervisor(SupervisionMixin, RecoveryMixin, QueueingMixin):
    """Pools, agents and their supervision (created by `Scheduler`; not meant to be used directly)."""

    def __init__(
        self,
        namespace: str,
        state_path: str | None = None,
        check_interval_s: float = 1.0,
        stale_after_s: float = 15.0,
        ready_timeout_s: float = 120.0,
        heartbeat_interval_s: float = 1.0,
        max_recreations: int = 10,
        aging_per_s: float = 0.1,
    ):
        self.namespace = namespace
        self.queue = TaskQueue(aging_per_s)
        self.policy = PreemptionPolicy()
        self.state_path = state_path
        self.check_interval_s = check_interval_s
        self.stale_after_s = stale_after_s
        self.ready_timeout_s = ready_timeout_s
        self.heartbeat_interval_s = heartbeat_interval_s
        self.max_recreations = max_recreations
        self.pools: dict[str, Pool] = {}
        self.agents: dict[str, AgentRecord] = {}
        self.handles: dict[str, object] = {}
        self.probes: dict[str, asyncio.Future] = {}
        self.recovering: set[str] = set()
        self.events: list[dict] = []
        self._monitor: asyncio.Task | None = None
        self._stalls: list[tuple[float, float]] = []  # (woke at, seconds) of the monitor's own stalls (supervision.py)
        self._starting: asyncio.Future | None = None
        if state_path:
            self.pools, self.agents, saved = load_state(state_path)
            self.queue.restore(saved.get("tasks", {}))
            self.policy = PreemptionPolicy(**saved.get("policy", {}))
        try:  # after a crash Ray restarts this actor and nobody else would call start(): ask ourselves
            ray.get_runtime_context().current_actor.start.remote()
        except Exception:  # constructed outside an actor (tests of the bookkeeping)
            pass

    # --- persistence (start-up and recovery: schedulemesh.recovery) ---

    def _persist(self) -> None:
        if self.state_path:
            save_state(
                self.state_path, self.pools, self.agents, {"tasks": self.queue.snapshot(), "policy": vars(self.policy)}
            )

    def _event(self, kind: str, agent: str, **detail) -> None:
        self.events.append({"time": time.time(), "kind": kind, "agent": agent, **detail})
        del self.events[:-1000]

    # --- pools ---

    async def create_pool(
        self,
        name: str,
        labels: dict | None,
        resources: dict | None,
        target_agents: int = 0,
        placement_strategy: str | None = None,
        priority: int = 0,
        node_labels: dict | None = None,
        exist_ok: bool = False,
    ) -> dict:
        """Create a pool after checking the cluster can hold its capacity (and its placement group)."""
        if name in self.pools:
            if exist_ok:
                return self.pools[name].info(self._pool_agents(name))
            raise AlreadyExists(f"pool {name!r} exists already (pass exist_ok=True to reuse it)")
        pool = Pool(
            name,
            dict(labels or {}),
            R.normalize(resources),
            int(target_agents),
            placement_strategy,
            int(priority),
            dict(node_labels or {}),
        )
        cluster = R.from_ray(ray.cluster_resources())
        R.require(f"cluster (for pool {name!r})", pool.capacity, cluster)
        if pool.placement_strategy:
            bundle = R.to_bundle(pool.spec)
            if not bundle:
                raise InvalidOptions(f"pool {name!r}: a placement group needs a non-zero per-agent resource spec")
            if pool.placement_strategy == "STRICT_SPREAD":
                nodes = sum(1 for n in ray.nodes() if n.get("Alive"))
                if pool.target_agents > nodes:
                    # Ray would keep such a group pending forever: say so now instead of after the timeout.
                    raise InsufficientCapacity(
                        f"pool {name!r}: STRICT_SPREAD needs {pool.target_agents} nodes, the cluster has {nodes}"
                    )
            pg = placement_group(
                [bundle] * pool.target_agents,
                strategy=pool.placement_strategy,
                name=f"schedulemesh:{name}",
                lifetime="detached",
            )
            try:
                await asyncio.wait_for(pg.ready(), self.ready_timeout_s)
            except (TimeoutError, GetTimeoutError):
                remove_placement_group(pg)
                raise InsufficientCapacity(
                    f"pool {name!r}: the cluster cannot place {pool.target_agents} bundles of {bundle} with "
                    f"{pool.placement_strategy} within {self.ready_timeout_s:g}s"
                ) from None
            pool.placement_group_id = pg.id.hex()
        self.pools[name] = pool
        self._persist()
        return pool.info([])

    def _pool(self, name: str) -> Pool:
        if name not in self.pools:
            raise PoolNotFound(f"no pool named {name!r}; pools: {sorted(self.pools) or 'none'}")
        return self.pools[name]

    def _pool_agents(self, pool: str) -> list[str]:
        return [a.name for a in self.agents.values() if a.pool == pool]

    async def get_pool(self, name: str) -> dict:
        """The pool's labels, ledger and agents."""
        return self._pool(name).info(self._pool_agents(name))

    async def list_pools(self, labels: dict | None = None) -> list[dict]:
        """Every pool whose labels match."""
        return [p.info(self._pool_agents(n)) for n, p in sorted(self.pools.items()) if p.matches(labels)]

    async def delete_pool(self, name: str, force: bool = False) -> None:
        """Delete a pool; with force its agents are stopped first."""
        pool = self._pool(name)
        members = self._pool_agents(name)
        if members and not force:
            raise InvalidOptions(f"pool {name!r} still has agents {members}; delete them or pass force=True")
        for agent in members:
            await self.delete_agent(agent)
        if pool.placement_group_id:
            remove_placement_group(PlacementGroup(ray.PlacementGroupID(bytes.fromhex(pool.placement_group_id))))
        del self.pools[name]
        self._persist()

    # --- agents ---

    async def create_agent(
        self,
        name: str,
        pool: str,
        actor_class: type,
        resources: dict | None = None,
        ray_options: dict | None = None,
        actor_args: tuple = (),
        actor_kwargs: dict | None = None,
        labels: dict | None = None,
    ) -> dict:
        """Reserve -> create the actor -> wait until its constructor finished -> commit; roll back on failure."""
        opts, from_options = R.split_ray_options(ray_options)
        # ray_options["name"] names the Ray actor (what other drivers reconnect to with ray.get_actor);
        # the agent name stays the scheduler's key. Two agents may not claim the same Ray name.
        ray_name = opts.pop("name", None) or name
        get_if_exists = bool(opts.pop("get_if_exists", False))
        taken = [a.name for a in self.agents.values() if (a.ray_name or a.name) == ray_name and a.name != name]
        if taken:
            raise InvalidOptions(f"ray_options['name']={ray_name!r} is the Ray name of agent {taken[0]!r} already")
        if name in self.agents:
            if get_if_exists and self.agents[name].pool == pool:
                return self.agents[name].info()
            raise AlreadyExists(f"agent {name!r} exists already in pool {self.agents[name].pool!r}")
        p = self._pool(pool)
        # resources= wins over resource keys given in ray_options, which win over the pool's per-agent spec.
        base = p.default_request() if resources is None else {}
        request = R.normalize({**base, **from_options, **R.normalize(resources)})
        self._check_placeable(name, p, request)
        p.reserve(request)  # raises InsufficientCapacity naming the short resource
        try:
            await self._preempt_for(name, p, request)
        except BaseException:
            p.rollback(request)
            raise
        rec = AgentRecord(
            name=name,
            pool=pool,
            actor_class=actor_class,
            args=tuple(actor_args),
            kwargs=dict(actor_kwargs or {}),
            resources=request,
            ray_options=opts,
            labels={**p.labels, **(labels or {})},
            namespace=opts.pop("namespace", self.namespace),
            ray_name=ray_name if ray_name != name else "",
        )
        try:
            if p.placement_group_id:
                rec.bundle = p.take_bundle(name)
            self.agents[name] = rec
            await self._spawn(rec)
        except BaseException as exc:
            p.rollback(request)
            p.give_bundle(name)
            self.agents.pop(name, None)
            self.handles.pop(name, None)
            if isinstance(exc, (InvalidOptions, AgentCreationError)):
                raise
            raise AgentCreationError(f"agent {name!r} in pool {pool!r} failed to start: {exc}") from None
        p.commit(request)
        self._persist()
        return rec.info()

    def _check_placeable(self, name: str, pool: Pool, request: dict[str, float]) -> None:
        # Ray would keep an impossible actor pending forever; say so now instead.
        nodes = _node_totals(pool.node_labels)
        if not nodes:
            raise InsufficientCapacity(
                f"agent {name!r}: no alive node matches pool {pool.name!r} node_labels {pool.node_labels}"
            )
        if not any(not R.shortfall(request, n) for n in nodes):
            best = min(nodes, key=lambda n: sum(R.shortfall(request, n).values()))
            raise InsufficientCapacity(
                R.describe_shortfall(
                    f"node (no node can host agent {name!r})", R.shortfall(request, best), request, best
                )
            )

    async def _spawn(self, rec: AgentRecord) -> None:
        """Create the Ray actor for rec's current incarnation and wait for its constructor."""
        pool = self.pools[rec.pool]
        opts = {
            **R.to_ray_options(rec.resources),
            **rec.ray_options,
            "name": rec.ray_name or rec.name,
            "namespace": rec.namespace,
        }
        if pool.node_labels and "label_selector" not in opts:
            opts["label_selector"] = dict(pool.node_labels)
        if pool.placement_group_id and rec.bundle is not None:
            pg = PlacementGroup(ray.PlacementGroupID(bytes.fromhex(pool.placement_group_id)))
            opts["scheduling_strategy"] = PlacementGroupSchedulingStrategy(pg, placement_group_bundle_index=rec.bundle)
        ctx = {
            "name": rec.name,
            "labels": rec.labels,
            "supervisor": ray.get_runtime_context().current_actor,
            "incarnation": rec.incarnation,
            "heartbeat_interval_s": self.heartbeat_interval_s,
        }
        cls = ray.remote(managed(rec.actor_class))
        deadline = time.monotonic() + 30
        while True:
            try:
                handle = cls.options(**opts).remote(ctx, *rec.args, **rec.kwargs)
                break
            except ValueError as exc:
                # A killed actor's name is freed asynchronously; a recreation waits for it.
                if "already taken" not in str(exc) or time.monotonic() > deadline:
                    raise AgentCreationError(f"agent {rec.name!r}: {exc}") from None
                await asyncio.sleep(0.2)
        self.handles[rec.name] = handle
        try:
            ready = await asyncio.wait_for(handle.sm_ready.remote(), self.ready_timeout_s)
        except TimeoutError:
            ray.kill(handle, no_restart=True)
            # sm_ready answers once the constructor has run, so this also covers a placed agent whose
            # constructor is slow (a worker importing torch on a loaded machine): say both.
            raise AgentCreationError(
                f"agent {rec.name!r} was not scheduled within {self.ready_timeout_s:g}s "
                f"(requested {rec.resources}; pool {rec.pool!r}), or its constructor had "
                f"not finished by then (raise ready_timeout_s for a slow start)"
            ) from None
        except Exception as exc:
            ray.kill(handle, no_restart=True)
            raise AgentCreationError(
                f"agent {rec.name!r}: constructor of {rec.actor_class.__name__} failed: {_root_cause(exc)}"
            ) from None
        rec.pid, rec.node_id, rec.ip = ready["pid"], ready["node_id"], ready["ip"]
        rec.status, rec.last_heartbeat, rec.last_error = "alive", time.time(), None

    async def get_agent(self, name: str) -> dict:
        """One agent's record."""
        if name not in self.agents:
            raise AgentNotFound(f"no agent named {name!r}")
        return self.agents[name].info()

    async def list_agents(self, pool: str | None = None, labels: dict | None = None) -> list[dict]:
        """Agents of a pool (or all), filtered by labels."""
        if pool is not None:
            self._pool(pool)
        return [
            a.info()
            for n, a in sorted(self.agents.items())
            if (pool is None or a.pool == pool) and all(a.labels.get(k) == v for k, v in (labels or {}).items())
        ]

    async def delete_agent(self, name: str, graceful: bool = True, timeout_s: float = 10.0) -> None:
        """Stop an agent (on_stop first when graceful), free its resources and forget it."""
        if name not in self.agents:
            raise AgentNotFound(f"no agent named {name!r}")
        rec = self.agents[name]
        # A preempted agent, or one supervision stopped (its pool at target without it), freed its share already.
        was_holding = rec.status not in ("preempted", "stopped")
        rec.status = "stopped"
        handle = self.handles.pop(name, None)
        if handle is not None:
            if graceful:
                try:
                    await asyncio.wait_for(handle.sm_stop.remote(), timeout_s)
                except Exception:  # exit_actor ends the call with an actor error; a hung agent times out
                    pass
            ray.kill(handle, no_restart=True)
            await self._name_released(name, rec.namespace, timeout_s)
        pool = self.pools.get(rec.pool)
        if pool is not None and was_holding:
            pool.release(rec.resources)
            pool.give_bundle(name)
        del self.agents[name]
        self.probes.pop(name, None)
        self._event("deleted", name)
        self._persist()

    async def _name_released(self, name: str, namespace: str, timeout_s: float) -> None:
        # ray.kill returns before the actor is gone; callers re-create agents under the same name at once.
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            try:
                ray.get_actor(name, namespace=namespace)
            except ValueError:
                return
            await asyncio.sleep(0.05)
        log.warning("agent %s: its name still resolves %gs after it was killed", name, timeout_s)

    async def wait_alive(self, name: str, min_incarnation: int = 0, timeout_s: float = 60.0) -> dict:
        """Block until the agent is alive at incarnation >= min_incarnation."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            rec = self.agents.get(name)
            if rec is not None and rec.status == "alive" and rec.incarnation >= min_incarnation:
                return rec.info()
            if rec is not None and rec.status == "failed":
                raise AgentCreationError(f"agent {name!r} could not be recreated: {rec.last_error}")
            await asyncio.sleep(0.05)
        raise TimeoutError(f"agent {name!r} not alive at incarnation >= {min_incarnation} within {timeout_s:g}s")

    async def events_since(self, t: float = 0.0) -> list[dict]:
        """Supervision events (recreated, ray_restart, deleted, recovery_failed) after time t."""
        return [e for e in self.events if e["time"] > t]
