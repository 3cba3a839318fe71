"""Agent classes the schedulemesh tests create (importable by Ray workers: classes travel by reference)."""

from __future__ import annotations

import os
import time
from pathlib import Path

import ray

from schedulemesh import AgentActor


class Echo(AgentActor):
    """Remembers its constructor argument; says where it runs."""

    def __init__(self, value=None, marker: str | None = None):
        self.value = value
        self.marker = marker

    def whoami(self) -> dict:
        ctx = ray.get_runtime_context()
        pg = ctx.get_placement_group_id()
        return {
            "value": self.value,
            "pid": os.getpid(),
            "name": self.name,
            "labels": self.labels,
            "node_id": ctx.get_node_id(),
            "resources": ctx.get_assigned_resources(),
            "placement_group": pg,
        }

    def work(self, seconds: float) -> int:
        with self.busy():
            time.sleep(seconds)
        return os.getpid()

    def go_silent(self) -> None:
        """Stop heartbeating while staying alive (a hung agent, as the supervisor sees it)."""
        self._sm_stopping.set()

    def on_stop(self) -> None:
        if self.marker:
            Path(self.marker).write_text(f"stopped {self.name}")


class Broken(AgentActor):
    """A constructor that fails: creation must roll back."""

    def __init__(self):
        raise RuntimeError("model file missing")


class Plain:
    """Not an AgentActor: schedulemesh still supervises it."""

    def __init__(self, x: int):
        self.x = x

    def get(self) -> int:
        return self.x


class Evictable(AgentActor):
    """Leaves a note when told it is being preempted."""

    def __init__(self, marker: str):
        self.marker = marker

    def on_preempt(self, reason: str) -> None:
        Path(self.marker).write_text(reason)


class SelfNamed(AgentActor):
    """Written as ScheduleMesh's guide writes agents: name, labels, supervisor first (passed by the
    scheduler), then its own keyword arguments; it assigns self.name / self.labels itself."""

    def __init__(self, name: str, labels: dict, supervisor=None, *, suffix: str = "", tier: str = ""):
        super().__init__(name, labels, supervisor)
        self.name = name + suffix
        self.labels = {**labels, "tier": tier}
        self.had_supervisor = supervisor is not None

    def identity(self) -> dict:
        return {"name": self.name, "labels": self.labels, "pid": os.getpid(), "supervised": self.had_supervisor}


# --- ScheduleMesh's agent-configuration guide, as written there (import path, decorator, signatures) ---

from schedulemesh.core.agent_actor import AgentActor as GuideAgentActor  # noqa: E402


@ray.remote
class ModelServerAgent(GuideAgentActor):
    """The guide's custom agent: name, labels, supervisor first, then keyword-only settings."""

    def __init__(
        self,
        name: str,
        labels: dict,
        supervisor=None,
        *,
        model_path: str,
        batch_size: int = 32,
        timeout: float = 30.0,
        enable_cache: bool = True,
    ):
        super().__init__(name, labels, supervisor)
        self.model_path = model_path
        self.batch_size = batch_size
        self.timeout = timeout
        self.enable_cache = enable_cache

    def settings(self) -> dict:
        ctx = ray.get_runtime_context()
        return {
            "name": self.name,
            "labels": self.labels,
            "model_path": self.model_path,
            "batch_size": self.batch_size,
            "timeout": self.timeout,
            "enable_cache": self.enable_cache,
            "resources": ctx.get_assigned_resources(),
            "env": {k: os.environ.get(k) for k in ("MODEL_PATH", "OMP_NUM_THREADS")},
        }


@ray.remote
class CustomAgent(GuideAgentActor):
    """The guide's positional + keyword example (its listing puts arg1/arg2 after a default; given defaults here)."""

    def __init__(self, name: str, labels: dict, supervisor=None, arg1=None, arg2=None, kwarg1=None, kwarg2=None):
        super().__init__(name, labels, supervisor)
        self.args = (arg1, arg2, kwarg1, kwarg2)

    def get_args(self) -> tuple:
        return self.args


@ray.remote
class CustomModelAgent(GuideAgentActor):
    """The guide's combined-configuration agent."""

    def __init__(self, name: str, labels: dict, supervisor=None, **settings):
        super().__init__(name, labels, supervisor)
        self.settings_ = settings

    def settings(self) -> dict:
        ctx = ray.get_runtime_context()
        return {
            **self.settings_,
            "resources": ctx.get_assigned_resources(),
            "env": {k: os.environ.get(k) for k in ("CUDA_VISIBLE_DEVICES", "OMP_NUM_THREADS")},
        }


class TaskWorker(AgentActor):
    """Runs queued tasks cooperatively: stops early when the scheduler preempts the task."""

    def __init__(self):
        self.told: list[tuple[str, str]] = []

    def on_task_preempted(self, task_id: str, reason: str) -> None:
        self.told.append((task_id, reason))

    def run(self, task_id: str, seconds: float) -> str:
        with self.busy():
            deadline = time.time() + seconds
            while time.time() < deadline:
                if self.task_preempted(task_id):
                    return "preempted"
                time.sleep(0.05)
        return "done"

    def preempted_told(self) -> list:
        return self.told


class OriginalStyle(AgentActor):
    """Written as the original ScheduleMesh's agents are: (name, labels, supervisor) first, then own arguments."""

    def __init__(self, name, labels, supervisor=None, greeting: str = "hello", *, interval: float = 60.0):
        super().__init__(name, labels, supervisor, report_interval=interval)
        self.greeting = greeting

    def greet(self) -> str:
        return f"{self.greeting} from {self.name}"

    def push(self, metrics: dict, force: bool = False) -> bool:
        sent = self.report_metrics(metrics, force=force)
        self.flush_metrics()
        return sent


class NamedEcho(AgentActor):
    """The original's echoing `invoke`, plus which agent answered (to see a strategy's picks)."""

    def __init__(self, name, labels, supervisor=None):
        super().__init__(name, labels, supervisor)

    def invoke(self, method: str, *args, **kwargs) -> dict:
        return {**super().invoke(method, *args, **kwargs), "agent": self.name}
