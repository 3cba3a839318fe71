"""How a round's stage hands its arguments to Prefect: configs and agent handles unwalked, results walked."""

from __future__ import annotations

from dataclasses import dataclass

from prefect.utilities.annotations import quote

from flows.runtime import IN_FLOW, Stage, _opaque
from planact.config import load_config


@dataclass(frozen=True)
class _Group:
    role: str


def test_configs_and_agent_handles_are_quoted_and_results_are_not():
    cfg = load_config("configs/smoke.yaml")
    assert isinstance(_opaque(cfg), quote) and _opaque(cfg).unquote() is cfg
    assert isinstance(_opaque(_Group("actor")), quote)
    assert isinstance(_opaque([_Group("planner"), _Group("actor")]), quote)  # the checkpoint stage's groups
    batch = [{"task_id": 1}]
    assert _opaque(batch) is batch and _opaque(3) == 3 and _opaque([]) == []  # a stage's result: walked for its edge
    assert _opaque(_Group) is _Group  # a class is not an instance


class _Task:
    def __init__(self, in_flow: bool):
        setattr(self, IN_FLOW, in_flow)
        self.calls = []

    def __call__(self, *args):
        self.calls.append(("call", args))

    def submit(self, *args):
        self.calls.append(("submit", args))


def test_ray_submissions_go_unquoted_because_prefect_ray_rebuilds_them_as_tuples():
    group = _Group("actor")
    thread, ray_task = _Task(in_flow=True), _Task(in_flow=False)
    Stage(thread).submit(group, 1)
    Stage(ray_task).submit(group, 1)
    Stage(ray_task)(group, 1)  # an inline call runs in the flow process: quoted
    assert isinstance(thread.calls[0][1][0], quote)
    assert ray_task.calls[0] == ("submit", (group, 1))
    assert isinstance(ray_task.calls[1][1][0], quote)


def test_a_server_planact_starts_records_task_runs_in_batches_unless_the_user_chose(monkeypatch):
    """The temporary Prefect server gets the batched task-run recorder; a value the user exported wins."""
    from prefect.settings import Settings

    from flows.runtime import server_env

    env = server_env({"PATH": "/bin", "PREFECT_SERVER_SERVICES_TASK_RUN_RECORDER_FLUSH_INTERVAL": "5"})
    assert env["PREFECT_SERVER_SERVICES_TASK_RUN_RECORDER_BATCH_SIZE"] == "100"
    assert env["PREFECT_SERVER_SERVICES_TASK_RUN_RECORDER_FLUSH_INTERVAL"] == "5"
    assert env["PATH"] == "/bin"
    # The names are Prefect's own settings (a misspelt one would be ignored silently): Prefect reads them.
    for k, v in env.items():
        if k.startswith("PREFECT_SERVER"):
            monkeypatch.setenv(k, v)
    services = Settings().server.services
    assert (services.task_run_recorder.batch_size, services.task_run_recorder.flush_interval) == (100, 5.0)
    assert services.event_persister.batch_size == 100
