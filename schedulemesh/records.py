"""What the supervisor remembers about an agent, and the durable state file it keeps."""

from __future__ import annotations

import os
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import cloudpickle


@dataclass
class AgentRecord:
    """Everything needed to recreate an agent, plus what supervision observed."""

    name: str
    pool: str
    actor_class: type
    args: tuple
    kwargs: dict
    resources: dict[str, float]
    ray_options: dict
    labels: dict[str, str]
    namespace: str
    bundle: int | None = None
    ray_name: str = ""  # the Ray actor's name when ray_options named it differently ("" = the agent name)
    incarnation: int = 0
    recreations: int = 0
    ray_restarts: int = 0
    status: str = "starting"  # starting | alive | recovering | stopped | preempted | failed
    pid: int | None = None
    node_id: str | None = None
    ip: str | None = None
    created_at: float = field(default_factory=time.time)
    last_heartbeat: float = 0.0
    report: dict = field(default_factory=dict)
    pushed: dict = field(default_factory=dict)  # metrics given by update_agent_metrics; they overlay `report`
    last_recovery_s: float | None = None
    last_error: str | None = None

    def take_report(self, report: dict) -> None:
        """A fresh report from the agent; metrics pushed from outside stay on top of it."""
        self.report = {**report, **self.pushed}

    def info(self) -> dict:
        """A plain-dict view for callers."""
        return {
            "name": self.name,
            "ray_name": self.ray_name or self.name,
            "pool": self.pool,
            "class": self.actor_class.__name__,
            "labels": dict(self.labels),
            "resources": dict(self.resources),
            "namespace": self.namespace,
            "status": self.status,
            "pid": self.pid,
            "node_id": self.node_id,
            "ip": self.ip,
            "incarnation": self.incarnation,
            "recreations": self.recreations,
            "ray_restarts": self.ray_restarts,
            "bundle": self.bundle,
            "load": float(self.report.get("load", 0.0)),
            "report": dict(self.report),
            "heartbeat_age_s": (time.time() - self.last_heartbeat) if self.last_heartbeat else None,
            "last_recovery_s": self.last_recovery_s,
            "last_error": self.last_error,
        }


def save_state(path: str | Path, pools: dict, agents: dict[str, AgentRecord], queue: dict | None = None) -> None:
    """Atomically write pools, agent records (classes by reference where importable) and the task queue."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    blob = cloudpickle.dumps({"version": 2, "pools": pools, "agents": agents, "queue": queue or {}})
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name + ".")
    with os.fdopen(fd, "wb") as f:
        f.write(blob)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def load_state(path: str | Path) -> tuple[dict, dict[str, AgentRecord], dict]:
    """Pools, agent records and the task queue's snapshot from a state file (all empty when there is none)."""
    path = Path(path)
    if not path.exists():
        return {}, {}, {}
    data = cloudpickle.loads(path.read_bytes())
    for rec in data["agents"].values():
        rec.__dict__.setdefault("pushed", {})  # records written before pushed metrics existed
    return data["pools"], data["agents"], data.get("queue") or {}  # version 1 files had no queue
