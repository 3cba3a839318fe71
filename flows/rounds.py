"""A Plan/Act round as named task runs of the training flow: the stages, and the three compositions of them.

    one job   : planner-generate -> barrier -> actor-execute (fan-out) -> score -> experience -> train-*
    planner job (two-job mode): planner-generate -> barrier -> feedback (wait) -> experience -> train-planner
    actor job   (two-job mode): barrier -> actor-execute -> score -> feedback (hand over) -> experience -> train-actor

Every stage is a task run named `round-<r>/<stage>` in the training flow run (no sub-flow per round): the
Prefect UI lists a run's rounds and stages on one page, and a round costs no flow-run start and exit.
Bulk data (plans, answers, samples) travels in `Payload` boxes (see tasks/plan_act.py). Drawing the round's
tasks is a plain call in the flow, not a task run: it is a deterministic function of seed and round that
takes microseconds, and a task run costs ~10 ms of flow process and ~15 ms of Prefect server CPU per round
(benchmarks/round_overhead.py).

A composition is a round's generation side; `Rounds` adds the training: right after it (synchronous) or
overlapping the next round's generation (`pipeline.max_staleness: 1`, then a `sync-<role>` stage hands
the engines the new weights once that generation is done).

The same round runs without Prefect (`Round(..., plain=True)`, `play_round(..., plain=True)`): each stage is
its task's own function, called in this process (a fan-out on threads), with the same agents, seeds and
barrier. It is the baseline of benchmarks/round_overhead.py (what orchestration costs) and the quickest
way to drive the agents from a notebook or a test; there is no second round implementation.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from prefect_ray.context import remote_options

from flows.runtime import Stage, agent_stage
from planact import agents
from planact.batch import RoundBatch
from planact.config import RunConfig
from planact.envs.base import make_env
from planact.experience import PoolRef
from planact.rollout import RoundResult
from planact.timing import Stopwatch, host_cpu_seconds
from tasks.experience import record_experience
from tasks.plan_act import Payload, actor_execute, barrier, planner_generate, score_rewards, sync_role, train_role


def named(task, round_idx: int, stage: str) -> Stage:
    """`task` as this round's named stage: its task run is `round-<r>/<stage>` in the UI and the logs."""
    return Stage(task.with_options(task_run_name=f"round-{round_idx}/{stage}"))


# A plain round's fan-out (actor shards, both roles' training) runs on these threads: the work itself is in
# the agents, as it is for the flow's stages.
_THREADS = ThreadPoolExecutor(max_workers=16, thread_name_prefix="plain-round")


class PlainStage:
    """A stage without Prefect: the task's own function, called here, or submitted to a thread (a future)."""

    def __init__(self, task):
        self.fn = task.fn

    def __call__(self, *args, wait_for=None, **kwargs):
        return self.fn(*args, **kwargs)

    def submit(self, *args, **kwargs):
        """Run on a thread of this process; the returned future's `result()` is the stage's result."""
        return _THREADS.submit(self.fn, *args, **kwargs)


@dataclass
class Round:
    """What one round's stages share: the run's config and agents, and the figures the round gathers."""

    cfg: RunConfig
    idx: int
    planner: agents.RoleGroup | None
    actor: agents.RoleGroup | None
    pool: PoolRef | None
    incarnation: str | None = None
    metrics: dict[str, float] = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)
    env_metrics: dict[str, float] = field(default_factory=dict)  # the scorer's figures (rewards, success)
    rollouts: list = field(default_factory=list)
    workers: list = field(default_factory=list)
    plain: bool = False
    """Run the stages as plain calls in this process (no task runs; see the module docstring)."""

    def __post_init__(self) -> None:
        self.clock = Stopwatch(self.timings)

    def stage(self, task, name: str, agent: bool = False):
        """`task` as this round's stage `name` (`agent`: one that only calls agents, see flows.runtime)."""
        if self.plain:
            return PlainStage(task)
        stage = named(task, self.idx, name)
        return agent_stage(stage, self.cfg) if agent else stage

    # -- stages -------------------------------------------------------------------------------------------
    # Stage results travel as the Payload a task returned: Prefect draws the edge from that task run to the
    # next (it knows a result by identity) and does not walk the data inside.
    def sample(self) -> Payload:
        """The round's tasks (deterministic in seed and round: both jobs of two-job mode draw the same)."""
        with self.clock("sample"):
            return Payload(make_env(self.cfg).sample_tasks(self.idx))

    def plan(self, tasks: Payload) -> Payload:
        """G plans (or graph-planner episodes) per task from the planner's engines."""
        with self.clock("planner_generate"):
            return self.stage(planner_generate, "planner-generate")(self.cfg, self.planner, tasks, self.idx)

    def meet(self, plans: Payload | None) -> list | None:
        """The plans barrier: returns the plans the actor executes (None when the round fell back)."""
        with self.clock("barrier"):
            ready = self.stage(barrier, "barrier")(
                self.cfg, self.idx, self.cfg.agent_role, plans, "plans", self.incarnation
            ).data
        fallback = ready["status"] == "fallback"
        self.metrics.update({"barrier_wait_s": ready["wait_s"], "fallback": float(fallback)})
        return None if fallback else ready["payloads"].get("planner")

    def execute(self, tasks: Payload, plans: list | None) -> RoundResult:
        """K answers per request, one task run per actor engine replica (the fan-out), then scored."""
        env = make_env(self.cfg)
        prompts = env.actor_requests(tasks.data, plans)
        with self.clock("actor_execute"), remote_options(num_cpus=self.cfg.ray.task_num_cpus):
            shards = agents.shard(prompts, len(self.actor.engines))
            futures = [
                self.stage(actor_execute, f"actor-execute-{i}", agent=True).submit(
                    self.cfg, self.actor, name, Payload(s), self.idx, i, env.actor_method
                )
                for i, (name, s) in enumerate(zip(self.actor.engines, shards))
            ]
            results = [f.result() for f in futures]
        self.workers = [res.where for res in results if res.where]
        answers = [a for res in results for a in res.data]
        with self.clock("score"):
            # wait_for: the UI's run graph draws actor-execute-<i> -> score (the answers arrive in a fresh box)
            scored = self.stage(score_rewards, "score")(
                self.cfg, tasks, Payload(plans), Payload(answers), wait_for=futures
            ).data
        self.env_metrics = scored.metrics
        self.rollouts = scored.rollouts
        return scored

    def hand_feedback(self, planner_samples: list) -> None:
        """Two-job mode, actor side: give the planner job its credited samples."""
        with self.clock("feedback"):
            self.stage(barrier, "feedback")(
                self.cfg, self.idx, self.cfg.agent_role, Payload(planner_samples), "feedback", self.incarnation
            )

    def await_feedback(self) -> RoundBatch:
        """Two-job mode, planner side: the actor job's credit for this round's plans (none when it never came)."""
        with self.clock("feedback"):
            fb = self.stage(barrier, "feedback")(
                self.cfg, self.idx, self.cfg.agent_role, None, "feedback", self.incarnation
            ).data
        samples = fb["payloads"].get("actor") if fb["status"] == "complete" else None
        self.metrics["fallback"] = float(samples is None)
        return RoundBatch(self.idx, {"planner": samples or []})

    def record(self, batch: RoundBatch) -> None:
        """Persist the round's experience, every role's samples, through the pool actor (one task run; a
        plain round without a pool keeps none)."""
        if self.pool is None:
            return
        with self.clock("experience"):
            items = batch.items(self.cfg.run_name)
            if items:
                out = self.stage(record_experience, "experience")(self.pool, Payload(items))
                self.metrics["experience/items"] = float(out["items"])

    def train(self, batch: RoundBatch, sync: bool = True) -> None:
        """One RL update per local trained role, the roles in parallel, each followed by its weight sync
        (pipelined rounds: `sync=False`, the engines get the weights in `sync_engines` once they are idle)."""
        self.collect(self.start_training(batch, sync))

    def start_training(self, batch: RoundBatch, sync: bool = True) -> dict:
        """Submit the round's training task runs (one per trained role, in parallel); returns their futures."""
        futures = {}
        with remote_options(num_cpus=self.cfg.ray.task_num_cpus):
            for group in (self.planner, self.actor):
                if group is None:
                    continue
                if group.trainer is None:
                    print(f"{group.role} is frozen (train: false): skipping its training this round")
                elif group.role in batch.roles:
                    futures[group.role] = self.stage(train_role, f"train-{group.role}", agent=True).submit(
                        group, Payload(batch.only(group.role)), sync
                    )
        self._train_started = time.perf_counter()
        return futures

    def collect(self, futures: dict) -> None:
        """Wait for the round's training task runs and keep their metrics."""
        for role, fut in futures.items():
            self.metrics.update({f"{role}/{k}": v for k, v in fut.result().items()})
        self.timings["train"] = time.perf_counter() - getattr(self, "_train_started", time.perf_counter())

    def sync_engines(self) -> None:
        """Pipelined rounds: push each trained role's new weights to its engines (which are idle now)."""
        with self.clock("sync"):
            for group in (self.planner, self.actor):
                if group is not None and group.trainer is not None:
                    self.metrics[f"{group.role}/sync_time_s"] = self.stage(sync_role, f"sync-{group.role}")(group)

    def result(self) -> dict:
        """The round's metrics (stage timings included), rollout rows and the workers that executed it."""
        return {
            "metrics": {**self.metrics, **self.env_metrics, **{f"time/{k}_s": v for k, v in self.timings.items()}},
            "rollouts": self.rollouts,
            "workers": self.workers,
        }


# -- compositions: a round's generation side, up to its recorded experience; training is the driver's ----------
def one_job(rnd: Round) -> RoundBatch:
    """Both roles in this flow run: plan, meet, execute, score, record; returns both roles' samples."""
    tasks = rnd.sample()
    plans = rnd.meet(rnd.plan(tasks))
    batch = rnd.execute(tasks, plans).batch(rnd.idx)
    rnd.record(batch)
    return batch


def planner_job(rnd: Round) -> RoundBatch:
    """Two-job mode, the planner's flow run: plan, meet, wait for the actor's credit, record."""
    tasks = rnd.sample()
    rnd.meet(rnd.plan(tasks))
    batch = rnd.await_feedback()
    rnd.record(batch)
    return batch


def actor_job(rnd: Round) -> RoundBatch:
    """Two-job mode, the actor's flow run: meet the planner's plans, execute, score, hand back credit, record."""
    tasks = rnd.sample()
    scored = rnd.execute(tasks, rnd.meet(None))
    # The planner's credit crosses to the other job as plain samples: the orchestrator keeps barrier payloads in
    # its state file, which a restarted orchestrator (perhaps of newer code) reads back.
    rnd.hand_feedback(scored.planner_samples)
    batch = scored.batch(rnd.idx).only("actor")
    rnd.record(batch)
    return batch


COMPOSITIONS = {"both": one_job, "planner": planner_job, "actor": actor_job}


def play_round(
    cfg: RunConfig,
    round_idx: int,
    planner: agents.RoleGroup | None,
    actor: agents.RoleGroup | None,
    pool: PoolRef | None,
    incarnation: str | None = None,
    plain: bool = False,
) -> dict:
    """Run round `round_idx` synchronously, generate then train: as named task runs of the calling flow, or
    (`plain`) as plain calls in this process."""
    t0 = time.perf_counter()
    rnd = Round(cfg, round_idx, planner, actor, pool, incarnation, plain=plain)
    rnd.train(COMPOSITIONS[cfg.agent_role](rnd))
    out = rnd.result()
    out["metrics"]["time/round_s"] = time.perf_counter() - t0
    return out


class Rounds:
    """Drives a run's rounds: synchronous (`pipeline.max_staleness` 0), or pipelined (1): round t+1
    generates with the weights of round t-1 while round t trains, and round t's weights reach the
    engines once round t+1's generation is done. The staleness is therefore exactly one version from the
    second round on, the same on every run (the loss corrects for it; docs/plan-act.md, "Pipelined rounds").

    `play(r)` yields the rounds it finished as result dicts, while no training is in flight, so the
    caller's checkpoint and held-out evaluation see the trainer and the engines at the finished round.
    """

    def __init__(
        self,
        cfg: RunConfig,
        planner: agents.RoleGroup | None,
        actor: agents.RoleGroup | None,
        pool: PoolRef,
        incarnation: str | None = None,
        plain: bool = False,
    ):
        self.cfg, self.planner, self.actor, self.pool, self.incarnation = cfg, planner, actor, pool, incarnation
        self.plain = plain  # every round's stages as plain calls in this process (Round.plain)
        self.training: tuple[Round, dict] | None = None  # the round whose training is in flight, its futures
        self._last_done = time.perf_counter()
        self._last_cpu = host_cpu_seconds()

    def play(self, round_idx: int) -> Iterator[dict]:
        """Generate round `round_idx`; yield every round this finishes (the one in training, or this one)."""
        rnd = Round(self.cfg, round_idx, self.planner, self.actor, self.pool, self.incarnation, plain=self.plain)
        batch = COMPOSITIONS[self.cfg.agent_role](rnd)
        yield from self.drain()
        if self.cfg.pipeline.max_staleness == 0:
            rnd.train(batch)
            yield self._finished(rnd)
        else:
            self.training = (rnd, rnd.start_training(batch, sync=False))

    def drain(self) -> Iterator[dict]:
        """Finish the round in training, if any: wait for it, sync its weights to the engines, yield it."""
        if self.training is not None:
            rnd, futures = self.training
            self.training = None
            rnd.collect(futures)
            rnd.sync_engines()
            yield self._finished(rnd)

    def _finished(self, rnd: Round) -> dict:
        out = rnd.result()
        # Pipelined, a round's own stages overlap the next one's: its wall time is the time between two
        # finished rounds (what rounds/hour counts).
        now, cpu = time.perf_counter(), host_cpu_seconds()
        out["metrics"]["time/round_s"] = now - self._last_done
        # How much of the machine the round kept busy (all its processes, all cores): a synchronous round
        # that already fills the cores has nothing for pipelining to overlap (benchmarks/async_rounds.py).
        out["metrics"]["time/host_cpu_s"] = cpu - self._last_cpu
        out["round"] = rnd.idx
        self._last_done, self._last_cpu = now, cpu
        return out
