"""What the flows need from Prefect itself: one API URL for every process, the task runner and stages, secrets,
artifacts. A flow's command line is flows/command.py."""

from __future__ import annotations

import contextlib
import dataclasses
import os
from pathlib import Path

from prefect.task_runners import TaskRunner, ThreadPoolTaskRunner
from prefect.utilities.annotations import quote
from prefect_ray import RayTaskRunner
from pydantic import BaseModel

from planact.config import load_config
from tasks import QUIET_ENV

# The embedded default of every flow's `config` parameter (and of the deployments' UI form).
DEMO = load_config(Path(__file__).resolve().parents[1] / "configs" / "demo.yaml")


# Server settings for a Prefect server that planact starts itself. Prefect's task-run recorder writes each
# task-run event in its own INSERT (batch size 1): ~30 ms of server CPU per task run here, on the cores the
# round's actors train on. Batched (flushed at 100 events or every second), the server's CPU per demo round
# fell from 0.26 to 0.13 s (benchmarks/round_overhead.py); a task run reaches the UI up to a second later.
# The event persister (the events feed) flushes every 20 events by default, more than once a demo round;
# at 100 it flushes on its 5-second timer instead (Prefect's default latency for that page).
# Values already in the environment win.
SERVER_ENV = {
    "PREFECT_SERVER_SERVICES_TASK_RUN_RECORDER_BATCH_SIZE": "100",
    "PREFECT_SERVER_SERVICES_TASK_RUN_RECORDER_FLUSH_INTERVAL": "1",
    "PREFECT_SERVER_SERVICES_EVENT_PERSISTER_BATCH_SIZE": "100",
}


EPHEMERAL_SERVER_START_S = 120  # seconds a run waits for its temporary Prefect server to answer


def server_env(environ: dict[str, str]) -> dict[str, str]:
    """`environ` with planact's Prefect server settings added where it does not set them already."""
    return {**SERVER_ENV, **environ}


def ensure_prefect_api() -> str:
    """Make sure one Prefect API serves the driver and every Ray worker; returns its URL.

    Without PREFECT_API_URL, Prefect starts a temporary server per process, and
    every Ray worker would start its own. Start the driver's
    temporary server first and export its URL so workers inherit it.
    """
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    url = os.environ.get("PREFECT_API_URL")
    if url:
        return url
    from prefect.settings import PREFECT_API_URL

    url = PREFECT_API_URL.value()
    if not url:
        from prefect.server.api.server import SubprocessASGIServer

        os.environ.update(server_env(dict(os.environ)))  # the server subprocess inherits this environment
        server = SubprocessASGIServer()
        # Prefect waits 20 s for it by default; on a loaded 2-core machine the first start took longer and the
        # run died before any work ("Timed out while attempting to connect to ephemeral Prefect API server").
        server.start(timeout=EPHEMERAL_SERVER_START_S)
        url = server.api_url
    os.environ["PREFECT_API_URL"] = url
    return url


# Tasks marked with this attribute run as threads of the flow process: stages whose work is a call to the
# agents (their compute is on Ray already), where a Ray task would only add a hop and a task-run start in a
# worker. An attribute, not a Prefect tag: every tagged task run asks the API for concurrency slots first
# (measured here: up to 2.3 s on every other round).
IN_FLOW = "planact_in_flow"


class SessionRayTaskRunner(RayTaskRunner):
    """A RayTaskRunner on the Ray that the run's session joined (config.ray.address), never one of its own.

    RayTaskRunner starts Ray when the flow run begins, before the flow has read its config; this one leaves
    starting and stopping Ray to the training session (which joins `ray.address` with the run's namespace and
    worker environment) and submits task runs to the Ray that session initialised. Tasks tagged
    by `agent_stage` run in a thread pool of the flow process instead (config `ray.agent_stages`).
    """

    def __enter__(self):
        TaskRunner.__enter__(self)
        self._threads = ThreadPoolTaskRunner(max_workers=32).__enter__()
        return self

    def __exit__(self, *exc_info):
        self._threads.__exit__(*exc_info)
        TaskRunner.__exit__(self, *exc_info)

    def submit(self, task, parameters, wait_for=None, dependencies=None):
        """Submit to the session's Ray (or a flow thread); a submission before the session started Ray is a clear
        error."""
        if getattr(task, IN_FLOW, False):
            return self._threads.submit(task, parameters, wait_for, dependencies)
        import ray

        if not ray.is_initialized():
            raise RuntimeError(f"task {task.name!r} submitted before the training session started Ray")
        return super().submit(task, parameters, wait_for, dependencies)


def _opaque(value):
    # Configs (pydantic) and agent handles (dataclasses) are never a task's result, so Prefect finds no
    # upstream task run in them; walking them for one (a RunConfig is ~270 nodes, twice per call) cost
    # milliseconds on every stage of every round. Quoted, the task still receives the value itself.
    def handle(v) -> bool:
        return isinstance(v, BaseModel) or (dataclasses.is_dataclass(v) and not isinstance(v, type))

    if handle(value) or (isinstance(value, (list, tuple)) and value and all(map(handle, value))):
        return quote(value)
    return value


class Stage:
    """A task called as one stage of a round: configs and agent handles are handed over unwalked; every
    other argument (a previous stage's result) is walked as usual, so the UI keeps its dependency edges."""

    def __init__(self, task):
        self.task = task

    def __call__(self, *args, **kwargs):
        return self.task(*map(_opaque, args), **{k: _opaque(v) for k, v in kwargs.items()})

    def submit(self, *args, **kwargs):
        """Submit to the flow's task runner (a Ray worker, or a flow thread for an agent stage)."""
        if getattr(self.task, IN_FLOW, False):  # a flow thread: called in this process, like __call__
            return self.task.submit(*map(_opaque, args), **{k: _opaque(v) for k, v in kwargs.items()})
        # To a Ray worker: prefect-ray rebuilds the parameters there, and a quoted value arrives as a bare
        # tuple (seen with ray.agent_stages: ray), so these go as they are and are walked.
        return self.task.submit(*args, **kwargs)


def agent_stage(task, cfg):
    """`task` where `ray.agent_stages` puts the stages that only call agents: a flow thread, or a Ray worker.

    Apply it last (after `with_options`, which makes a fresh task without the mark)."""
    if isinstance(task, Stage):
        return Stage(agent_stage(task.task, cfg))
    if cfg.ray.agent_stages != "threads":
        return task
    marked = task.with_options()  # a copy: the module's task object stays unmarked
    setattr(marked, IN_FLOW, True)
    return marked


def flow_run_url(flow_run_id) -> str:
    """The Prefect UI page of a flow run (the UI is served beside the API)."""
    return f"{os.environ.get('PREFECT_API_URL', '').rstrip('/').removesuffix('/api')}/runs/flow-run/{flow_run_id}"


def load_api_secrets(cfg) -> list[str]:
    """Put the keys named by `<role>.<engine>.api_key_secret` (Prefect Secret blocks) into their env vars.

    Done in the driver before Ray starts, so a local Ray's workers inherit them; keys never enter the
    config, Prefect parameters, Ray's runtime_env or a log line. Returns the variables it set.
    """
    done = []
    if hasattr(cfg, "executor"):  # an AFlow config: executor and optimizer models
        from aflow_rl.config import api_llms

        apis = [getattr(llm, llm.kind) for _, llm in api_llms(cfg)]
    else:
        apis = [getattr(rc, rc.engine) for rc in (cfg.planner, cfg.actor) if rc.engine in ("openai", "anthropic")]
    for api in apis:
        if api.api_key_secret and api.api_key_env and not os.environ.get(api.api_key_env):
            from prefect.blocks.system import Secret

            os.environ[api.api_key_env] = Secret.load(api.api_key_secret).get()
            done.append(api.api_key_env)
    return done


def worker_env() -> dict[str, str]:
    """Variables Ray workers must share with the driver."""
    keys = ("PREFECT_API_URL", "PREFECT_SERVER_ANALYTICS_ENABLED", "MLFLOW_TRACKING_URI", "PREFECT_HOME", QUIET_ENV)
    return {k: os.environ[k] for k in keys if os.environ.get(k)}


@contextlib.contextmanager
def tracked(tracker, owns_ray: bool, otherwise=None):
    """Mark the MLflow run FAILED when the body raises, and stop a Ray the flow started itself (on a Ray it
    joined, call `otherwise` instead: e.g. remove the agents it created there)."""
    try:
        yield
    except BaseException:
        tracker.finish("FAILED")
        raise
    finally:
        if owns_ray:
            import ray

            ray.shutdown()
        elif otherwise is not None:
            otherwise()


def publish_markdown(markdown: str, key: str) -> None:
    """Attach a markdown artifact to the current flow run (keys: lowercase, dashes)."""
    from prefect.artifacts import create_markdown_artifact

    safe = "".join(c if c.isalnum() else "-" for c in key.lower()).strip("-")[:100]
    create_markdown_artifact(markdown=markdown, key=safe, description="planact round table and MLflow link")
