"""MetricsReportingAgent: an agent that pushes its own metrics to the supervisor, throttled and bounded.

Heartbeats (schedulemesh.agent) already carry `metrics()` every second; this is the original
ScheduleMesh's explicit path, for figures an agent wants the scheduler to see now (a queue that just
grew). A report is refused (False) while the last one is younger than `report_interval` (unless
forced) or while `max_pending_reports` are still in flight, so a stalled supervisor never piles up
stale figures.
"""

from __future__ import annotations

import time

import ray


class MetricsReportingAgent:
    """Pushes `update_agent_metrics(name, metrics)` to the supervisor; see `report_metrics`."""

    def __init__(
        self,
        name: str | None = None,
        labels: dict[str, str] | None = None,
        supervisor=None,
        *,
        report_interval: float = 5.0,
        max_pending_reports: int = 16,
    ):
        self._mr_name, self._mr_labels, self._mr_supervisor = name, dict(labels or {}), supervisor
        self._mr_interval = float(report_interval)
        self._mr_max_pending = int(max_pending_reports)
        self._mr_pending: list = []
        self._mr_last = 0.0

    def _mr_target(self) -> tuple[str | None, object]:
        # A scheduler-made agent is bound before __init__ (schedulemesh.agent); a plain one by its arguments.
        name = self.__dict__.get("_sm_name") or self.__dict__.get("_mr_name")
        return name, self.__dict__.get("_sm_supervisor") or self.__dict__.get("_mr_supervisor")

    def _mr_settle(self) -> None:
        pending = self.__dict__.setdefault("_mr_pending", [])
        if pending:
            _, self._mr_pending = ray.wait(pending, num_returns=len(pending), timeout=0)

    def report_metrics(self, metrics: dict, *, force: bool = False) -> bool:
        """Send metrics (plus `timestamp`) to the supervisor; False when throttled or there is no supervisor."""
        name, supervisor = self._mr_target()
        if supervisor is None or name is None:
            return False
        now = time.time()
        if not force and now - self.__dict__.get("_mr_last", 0.0) < self.__dict__.get("_mr_interval", 5.0):
            return False
        self._mr_settle()
        if len(self._mr_pending) >= self.__dict__.get("_mr_max_pending", 16):
            return False
        self._mr_pending.append(supervisor.update_agent_metrics.remote(name, {**metrics, "timestamp": now}))
        self._mr_last = now
        return True

    def flush_metrics(self, timeout: float = 10.0) -> int:
        """Wait for reports still in flight; returns how many were."""
        pending = list(self.__dict__.get("_mr_pending", []))
        if pending:
            ray.wait(pending, num_returns=len(pending), timeout=timeout)
        self._mr_pending = []
        return len(pending)
