"""RayScheduler's preemption calls: the original ScheduleMesh's registry of running tasks, its preemption
decision (schedulemesh.rules), state handlers, and submission with preemption (plain and PG-pool).

The registry, history, policy and handlers live in the RayScheduler object, beside the core's own
task queue and pool-priority preemption; agents, quotas and placement groups are the core's.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

import ray

from schedulemesh import resources as R
from schedulemesh.core.controllers.views import flat, per_agent
from schedulemesh.errors import InsufficientCapacity
from schedulemesh.rules import RunningTask, candidates

REQUIRED = ("task_id", "pool_name", "resources", "actor_class")
OPTIONAL = {"priority": 5.0, "labels": None, "actor_args": None, "actor_kwargs": None, "ray_options": None}


class PreemptionCalls:
    """Mixin of RayScheduler (uses its scheduler, registry, policy, handlers and pg_pools)."""

    # --- registry ---

    def _default_resources(self, pool: str) -> dict[str, float] | None:
        try:
            return flat(per_agent(self.scheduler.get_pool(pool)))
        except Exception:  # unknown pool: no default, as the original
            return None

    def register_running_task(
        self,
        task_id: str,
        agent_name: str,
        pool_name: str,
        priority: float,
        labels: dict | None = None,
        estimated_duration: float = 0.0,
        payload: Any = None,
        resources: dict | None = None,
    ) -> dict:
        """{success, task_state}; no validation, the same id overwrites; resources default to the pool's."""
        self._live()
        if resources is None:
            resources = self._default_resources(pool_name)
        task = RunningTask(
            task_id,
            agent_name,
            pool_name,
            float(priority),
            dict(labels or {}),
            estimated_duration=float(estimated_duration),
            payload=payload,
            resources=flat(resources),
        )
        self.running[task_id] = task
        return {"success": True, "task_state": task.info()}

    def unregister_task(self, task_id: str) -> dict:
        """{success} or {success: False, error} when the task is not registered."""
        self._live()
        if self.running.pop(task_id, None) is None:
            return {"success": False, "error": f"Task '{task_id}' not found"}
        return {"success": True}

    # --- decision and execution ---

    def _victim_resources(self, task: RunningTask) -> dict | None:
        try:
            return self.scheduler.agent_info(task.agent_name)["resources"]
        except Exception:
            return None

    def evaluate_preemption(
        self,
        incoming_task_priority: float,
        incoming_task_pool: str,
        incoming_task_labels: dict | None = None,
        incoming_task_resources: dict | None = None,
    ) -> dict:
        """{should_preempt, candidates (best first), reason, evaluation_latency_ms}; changes nothing."""
        self._live()
        start = time.perf_counter()
        need = (
            incoming_task_resources
            if incoming_task_resources is not None
            else self._default_resources(incoming_task_pool)
        )
        found = candidates(
            self.policy,
            list(self.running.values()),
            float(incoming_task_priority),
            incoming_task_pool,
            incoming_task_labels,
            flat(need),
            self._victim_resources,
        )
        reason = (
            f"{len(found)} preemption candidate(s)"
            if found
            else "No running tasks to preempt"
            if not self.running
            else "No task meets the preemption policy"
        )
        return {
            "should_preempt": bool(found),
            "candidates": found,
            "reason": reason,
            "evaluation_latency_ms": (time.perf_counter() - start) * 1000,
        }

    def _execute(self, task_id: str, cancel: bool, preemptor: str | None = None) -> dict:
        start = time.perf_counter()
        task = self.running.get(task_id)
        if task is None:
            return {"success": False, "error": f"Task '{task_id}' is not a registered running task"}
        preserver = self.handlers.get(task.pool_name, (None, None))[0]
        saved = dict(preserver(task)) if preserver else {}
        saved = {**task.info(), **saved, "pool_name": task.pool_name}
        cancel_success = True
        if cancel:
            try:
                answer = ray.get(self.scheduler.get_agent(task.agent_name).handle.cancel.remote(task_id), timeout=10)
                cancel_success = bool(answer.get("success", True)) if isinstance(answer, dict) else True
            except Exception:
                cancel_success = False
        self.history.append(
            {
                "timestamp": time.time(),
                "task_id": task_id,
                "preemptor_task_id": preemptor,
                "agent_name": task.agent_name,
                "pool_name": task.pool_name,
                "priority": task.priority,
                "saved_state": saved,
                "cancel_success": cancel_success,
                "reason": task.last_preemption_reason,
            }
        )
        del self.running[task_id]
        return {
            "success": True,
            "saved_state": saved,
            "cancel_success": cancel_success,
            "execution_latency_ms": (time.perf_counter() - start) * 1000,
        }

    def execute_preemption(self, task_id: str, agent_name: str | None = None) -> dict:
        """{success, saved_state, cancel_success, execution_latency_ms}: state saved, history kept, task dropped.

        As in the original, the agent is not told (no cancel call) and keeps running with its quota."""
        self._live()
        return self._execute(task_id, cancel=False)

    def preempt_task(
        self,
        *,
        incoming_task_priority: float,
        incoming_task_pool: str,
        incoming_task_labels: dict | None = None,
        incoming_task_resources: dict | None = None,
        target_task_id: str | None = None,
        target_agent_name: str | None = None,
    ) -> dict:
        """Evaluate, then execute the best (or the targeted) candidate: {success, evaluation, chosen_candidate,
        execution} or {success: False, reason, evaluation}. Frees no capacity."""
        evaluation = self.evaluate_preemption(
            incoming_task_priority, incoming_task_pool, incoming_task_labels, incoming_task_resources
        )
        pool = evaluation["candidates"]
        if target_task_id is not None:
            pool = [c for c in pool if c["task_id"] == target_task_id]
        if target_agent_name is not None:
            pool = [c for c in pool if c["agent_name"] == target_agent_name]
        if not pool:
            return {
                "success": False,
                "reason": "no eligible candidate" if evaluation["candidates"] else evaluation["reason"],
                "evaluation": evaluation,
            }
        execution = self._execute(pool[0]["task_id"], cancel=False)
        return {
            "success": execution["success"],
            "evaluation": evaluation,
            "chosen_candidate": pool[0],
            "execution": execution,
        }

    def get_preemption_stats(self) -> dict:
        """{total_preemptions, same_pool_preemptions, cross_pool_preemptions, running_tasks, recent_preemptions}."""
        self._live()
        same = sum(1 for h in self.history if h["reason"] == "same_pool_preemption")
        return {
            "total_preemptions": len(self.history),
            "same_pool_preemptions": same,
            "cross_pool_preemptions": len(self.history) - same,
            "running_tasks": len(self.running),
            "recent_preemptions": self.history[-10:],
        }

    def update_preemption_policy(self, **kw) -> dict:
        """{success, policy}; `preemption_aggressiveness` first, unknown keys ignored."""
        self._live()
        try:
            return {"success": True, "policy": self.policy.update(**kw)}
        except (ValueError, TypeError) as err:
            return {"success": False, "error": str(err)}

    def register_state_handlers(self, pool_name: str, preserver, restorer) -> dict:
        """preserver(task_state) -> dict runs when a task of the pool is preempted; restorer(saved_state) later."""
        self._live()
        self.handlers[pool_name] = (preserver, restorer)
        return {"success": True}

    def restore_task(self, saved_state: dict) -> dict:
        """Run the restorer of saved_state["pool_name"] (no restorer: nothing to do)."""
        self._live()
        restorer = self.handlers.get(saved_state.get("pool_name"), (None, None))[1]
        if restorer is None:
            return {"success": True, "restored": False}
        try:
            restorer(saved_state)
        except Exception as err:  # a user hook: report, do not raise
            return {"success": False, "error": f"restorer failed: {err!r}"}
        return {"success": True, "restored": True}

    # --- submission with preemption ---

    @staticmethod
    def _submission(kw: dict, defaults: dict) -> dict:
        missing = [k for k in REQUIRED if kw.get(k) is None]
        if missing:
            raise ValueError(f"missing required keys: {', '.join(missing)}")
        unknown = set(kw) - set(REQUIRED) - set(defaults)
        if unknown:
            raise ValueError(f"unknown keys: {', '.join(sorted(unknown))}")
        return {**defaults, **kw}

    def _preempt_one(self, spec: dict, destroy_pg: bool) -> dict | None:
        """Evaluate for `spec`, execute the best candidate (telling its agent), force-delete the victim's agent.
        None when done; else the failure answer."""
        try:
            evaluation = self.evaluate_preemption(
                spec["priority"], spec["pool_name"], spec["labels"], spec["resources"]
            )
        except Exception as err:
            return {"success": False, "error": str(err), "reason": "preemption_failed"}
        if not evaluation["candidates"]:
            return {"success": False, "error": evaluation["reason"], "reason": "empty_candidates"}
        victim = evaluation["candidates"][0]
        execution = self._execute(victim["task_id"], cancel=True, preemptor=spec["task_id"])
        if not execution["success"]:
            return {"success": False, "error": execution["error"], "reason": "preemption_execution_failed"}
        self.delete_agent(victim["agent_name"], force=True, destroy_pg=destroy_pg)
        return None

    def _with_preemption(self, spec: dict, create, preempt_on: type[BaseException], destroy_pg: bool) -> dict:
        """create(); when it fails with `preempt_on`, preempt one running task and create once more."""
        try:
            return {"success": True, **create()}
        except preempt_on:
            pass
        except Exception as err:
            return {"success": False, "error": str(err), "reason": "agent_creation_failed"}
        failure = self._preempt_one(spec, destroy_pg=destroy_pg)
        if failure:
            return failure
        try:
            return {"success": True, **create()}
        except Exception as err:
            return {"success": False, "error": str(err), "reason": "post_preemption_reservation_failed"}

    def submit_task_with_preemption(self, **kw) -> dict:
        """Create the task's agent; when the pool's quota is short, preempt one running task and retry once.

        {success, agent} or {success: False, error, reason}. The agent is not registered as a running task."""
        self._live()
        try:
            spec = self._submission(kw, {**OPTIONAL, "agent_name": None})
        except ValueError as err:
            return {"success": False, "error": str(err), "reason": "invalid_request"}
        name = spec["agent_name"] or f"{spec['pool_name']}-agent-{uuid.uuid4().hex[:6]}"
        labels = {**(spec["labels"] or {}), "pool": spec["pool_name"]}

        def create() -> dict:
            agent = self._spawn(
                name,
                spec["pool_name"],
                spec["actor_class"],
                spec["resources"],
                spec["ray_options"],
                spec["actor_args"],
                spec["actor_kwargs"],
                labels,
            )
            return {"agent": agent}

        return self._with_preemption(spec, create, InsufficientCapacity, destroy_pg=True)

    def submit_task_with_pg_preemption(self, **kw) -> dict:
        """Create the agent (named task_id) in a placement group of its pool (a plain actor when the pool has
        none), quota checked first (short quota: an error, no preemption); when the group cannot be had,
        preempt one running task (its group is kept for reuse) and retry once. Registers the running task."""
        self._live()
        try:
            spec = self._submission(kw, {**OPTIONAL, "auto_register": True, "estimated_duration": 0.0})
            need = flat(spec["resources"])
        except ValueError as err:  # InvalidOptions (a bad resource) is a ValueError too
            return {"success": False, "error": str(err), "reason": "invalid_request"}
        name, pool = spec["task_id"], spec["pool_name"]
        try:
            free = self.scheduler.get_pool(pool)["free"]
        except Exception as err:
            return {"success": False, "error": str(err)}
        short = R.shortfall(need, free)
        if short:
            return {"success": False, "error": R.describe_shortfall(f"pool {pool!r}", short, need, free)}
        labels = {**(spec["labels"] or {}), "pool": pool}

        def create() -> dict:
            options = dict(spec["ray_options"] or {})
            group = None
            if self.pg_pools.enabled(pool):
                group = self.pg_pools.allocate(name, pool, need, spec["priority"])
                options["scheduling_strategy"] = self.pg_pools.strategy_for(group)
            try:
                agent = self._spawn(
                    name, pool, spec["actor_class"], need, options, spec["actor_args"], spec["actor_kwargs"], labels
                )
            except BaseException:
                self.pg_pools.release(name)
                raise
            return {"agent": agent, "placement_group": group.info() if group else None}

        out = self._with_preemption(spec, create, Exception, destroy_pg=False)
        if out["success"] and spec["auto_register"]:
            registered = self.register_running_task(
                name, name, pool, spec["priority"], spec["labels"], spec["estimated_duration"], resources=need
            )
            out["task_state"] = registered["task_state"]
        return out

    # --- placement-group pools ---

    def configure_pg_pool(self, pool_name: str, **kw) -> dict:
        """{success, pool_name, high_priority_pgs, config}; re-configuring destroys the pool's old groups."""
        self._live()
        try:
            self.scheduler.get_pool(pool_name)
            kw.pop("enable", None)
            return self.pg_pools.configure(pool_name, **kw)
        except Exception as err:
            return {"success": False, "error": str(err)}

    def get_pg_pool_stats(self, pool_name: str | None = None) -> dict:
        """Group counts of a pool (no `success` key), or {pools: {...}} for all."""
        self._live()
        return self.pg_pools.stats(pool_name)
