"""Train AFlow's optimizer model itself with RL: many searches at once, GiGPO over their transitions, GRPO.

One iteration (`train_iteration`):

    reset `searches` WorkflowEnvs per trained benchmark (optimizer_rl.benchmarks), each with a fresh seed
    -> step them together until every one has ended: the optimizer model reads each
       Observation.text() and samples one of the edits open there (decoding constrained to that set:
       the model's own distribution over it, with the token log-probabilities GRPO needs)
    -> GiGPO advantages over all the iteration's transitions (episode group: one benchmark's searches,
       so an easy benchmark's high returns never push a hard one's down; anchor: the identical parent
       workflow met in several searches of that benchmark)
    -> one GRPO update of the optimizer model (planact's RoleTrainer), weights synced to its engine

A tiny optimizer is a locally built Llama with a BPE tokenizer trained on rendered observations, so a
CPU can train it; constrained decoding means it never writes an edit that does not apply (real models
answering in AFlow's free format go through WorkflowEnv's validation instead, their invalid answers
scored 0). The untrained model is the baseline a trained one must beat (`run_searches` with either).
"""

from __future__ import annotations

import hashlib
import json
import random
import shutil
import statistics
from pathlib import Path

import torch

from aflow_rl import space
from aflow_rl.config import AFlowConfig, OptimizerRLConfig
from aflow_rl.env import Observation, WorkflowEnv, edit_text, step_advantages
from aflow_rl.optimizers import LLMOptimizer, optimizer_request
from planact.batch import RoundBatch, pool_item
from planact.engines.base import SamplingParams
from planact.engines.hf import HFEngine
from planact.models import build_bpe_tokenizer, build_tiny_model, load_model
from planact.rl.trainer import RoleTrainer
from planact.samples import Sample

ROLE = "aflow-optimizer"  # the optimizer's role in its round batches and the experience pool


def observation_corpus(benchmark: str, n: int = 400, seed: int = 0) -> list[str]:
    """Texts the optimizer's tokenizer is trained on: observations along random walks through the edit space."""
    rng = random.Random(f"{seed}:optimizer-corpus:{benchmark}")
    family = space.FAMILIES[benchmark]
    edits = space.catalogue(family)
    texts = [edit_text(e) for e in edits]
    for _ in range(n):
        spec = space.initial_spec(benchmark)
        for _ in range(rng.randrange(5)):
            spec = space.apply(spec, rng.choice(edits)) or spec
        graph, prompt = space.render(spec)
        open_ = [edit_text(e) for e in edits if space.apply(spec, e) is not None]
        tried = [f"{rng.uniform(-0.3, 0.3):+.4f} {e.describe()}" for e in rng.sample(edits, rng.randrange(3))]
        texts.append(
            Observation(
                benchmark, 2, 1, rng.random(), graph, prompt, tried, rng.sample(open_, rng.randrange(1, len(open_) + 1))
            ).text()
        )
    return texts


class OptimizerModel:
    """The optimizer as a trainable tiny model: an engine that chooses among open edits, and its trainer."""

    def __init__(
        self, cfg: OptimizerRLConfig, benchmarks: str | list[str], seed: int, folder: str | Path | None = None
    ):
        self.cfg = cfg
        if (
            folder is None
        ):  # a fresh model: tokenizer trained here (on every benchmark's observations), weights from the seed
            names = [benchmarks] if isinstance(benchmarks, str) else list(benchmarks)
            corpus = [text for b in names for text in observation_corpus(b, seed=seed)]
            tok = build_bpe_tokenizer(corpus, cfg.tiny.vocab_size)
            self.model = build_tiny_model(cfg.tiny, len(tok), seed, tok)
        else:
            self.model, tok = load_model(folder)
        self._attach(tok, folder)

    def _attach(self, tok, folder: str | Path | None) -> None:
        """Engine and trainer over self.model; a checkpoint folder's trainer state (AdamW moments, schedule) too."""
        self.engine = HFEngine(self.model, tok, name=ROLE)
        self.trainer = RoleTrainer(self.model, tok.pad_token_id, self.cfg.rl, self.cfg.temperature)
        if folder is not None and (Path(folder) / "trainer.pt").is_file():
            self.trainer.load_state_dict(torch.load(Path(folder) / "trainer.pt", weights_only=False))
            self.engine.weight_version = self.trainer.steps

    def act(
        self, observations: list[Observation], seeds: list[int], envs: list[WorkflowEnv] | None = None
    ) -> list[dict]:
        """One open edit per observation (each drawn with its own seed), from the model's distribution over the open
        edits."""
        params = SamplingParams(temperature=self.cfg.temperature, n=1, row_seeds=seeds)
        picks = [
            c[0]
            for c in self.engine.choose(
                [(o.text(), o.allowed) for o in observations], params, length_normalise=self.cfg.scoring == "mean"
            )
        ]
        return [c.sample_fields() for c in picks]

    def update(self, batch: RoundBatch) -> dict[str, float]:
        """One GRPO step over an iteration's credited choices (`transition_batch`); the engine sees it at once."""
        metrics = self.trainer.train_step(batch.samples(ROLE))
        self.engine.update_weights()  # the trainer updated the engine's own model in place
        return metrics

    def save(self, folder: str | Path) -> Path:
        """An HF folder (weights + tokenizer + trainer state), written whole before it appears under its name."""
        folder = Path(folder)
        tmp = folder.with_name(f".{folder.name}.tmp")
        self.model.save_pretrained(tmp)
        self.engine.tokenizer.save_pretrained(tmp)
        torch.save(self.trainer.state_dict(), tmp / "trainer.pt")
        if folder.exists():  # a re-run iteration replaces its own earlier, unrecorded checkpoint
            shutil.rmtree(folder)
        tmp.rename(folder)
        return folder


class FreeFormOptimizerModel(OptimizerModel):
    """A real HF model as the trainable optimizer (optimizer_rl.model_path): it writes AFlow's full answers.

    It reads AFlow's own optimizer request for the observed parent and samples an answer; WorkflowEnv
    validates it (malformed, escaping or repeated answers score 0 and are counted), and GRPO trains on
    the answer's token log-probabilities with the same GiGPO advantages as the tiny model.
    """

    def __init__(self, cfg: AFlowConfig, folder: str | Path | None = None):
        rl = cfg.optimizer_rl
        self.cfg, self.search = rl, cfg.search
        self.model, tok = load_model(folder or rl.model_path, rl.device)
        self._attach(tok, folder)

    def act(
        self, observations: list[Observation], seeds: list[int], envs: list[WorkflowEnv] | None = None
    ) -> list[dict]:
        """One sampled answer per observed parent, to AFlow's optimizer request."""
        if envs is None:
            raise ValueError("the free-form optimizer reads each search's workspace: pass envs")
        requests = [
            optimizer_request(
                env.search.ws,
                o.parent,
                o.score,
                random.Random(seed),
                o.benchmark,
                self.search.failure_logs,
                self.search.max_operator_calls,
            )
            for o, env, seed in zip(observations, envs, seeds)
        ]
        params = SamplingParams(
            temperature=self.cfg.temperature, max_new_tokens=self.cfg.max_new_tokens, n=1, row_seeds=seeds
        )
        return [g[0].sample_fields() for g in self.engine.generate(requests, params)]


class FrozenAPIOptimizer:
    """`search.optimizer: llm` in a training run: an API model writes AFlow's full answers; frozen, never updated.

    The searches, their transitions, GiGPO figures and the experience pool are the same as for the tiny
    model, so a run records what an API optimizer does (data for a later imitation or a trainable
    model); the update is skipped and the checkpoint folder only names the model.
    """

    frozen = True

    def __init__(self, cfg: AFlowConfig):
        self.cfg = cfg
        self._by_benchmark: dict[str, LLMOptimizer] = {}

    def _optimizer(self, benchmark: str) -> LLMOptimizer:
        if benchmark not in self._by_benchmark:
            s = self.cfg.search
            self._by_benchmark[benchmark] = LLMOptimizer(
                s.optimizer_llm, benchmark, 1, s.failure_logs, s.max_operator_calls
            )
        return self._by_benchmark[benchmark]

    def act(
        self, observations: list[Observation], seeds: list[int], envs: list[WorkflowEnv] | None = None
    ) -> list[dict]:
        """AFlow's optimizer request for each observed parent, one answer each (validated by the environment)."""
        if envs is None:
            raise ValueError("the API optimizer reads each search's workspace: pass envs")
        out = []
        for o, env, seed in zip(observations, envs, seeds):
            opt = self._optimizer(o.benchmark)
            request = opt.build_prompt(env.search.ws, o.parent, o.score, random.Random(seed), None)
            out.append(
                {"text": opt.ask(request), "prompt_ids": [], "token_ids": [], "logprobs": [], "weight_version": 0}
            )
        return out

    def update(self, batch: RoundBatch) -> dict[str, float]:
        """No update: the model is frozen (the figures say so)."""
        return {"frozen": 1.0, "n_samples": float(len(batch))}

    def save(self, folder: str | Path) -> Path:
        """A folder naming the API model (the run's resume point points at it like at a tiny checkpoint)."""
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        llm = self.cfg.search.optimizer_llm
        api = getattr(llm, llm.kind)
        (folder / "optimizer.json").write_text(json.dumps({"kind": llm.kind, "model": api.model, "frozen": True}))
        return folder


def make_optimizer(cfg: AFlowConfig, checkpoint: str | Path | None = None) -> OptimizerModel | FrozenAPIOptimizer:
    """The run's optimizer: the tiny structured-edit model, a real model writing free-form answers
    (optimizer_rl.model_path), or a frozen API model (search.optimizer: llm without a model_path)."""
    if cfg.optimizer_rl.model_path:
        return FreeFormOptimizerModel(cfg, checkpoint)
    if cfg.search.optimizer == "llm":
        return FrozenAPIOptimizer(cfg)
    return OptimizerModel(cfg.optimizer_rl, cfg.trained_benchmarks(), cfg.seed, checkpoint)


def _seed(*parts) -> int:
    return int.from_bytes(hashlib.blake2b(":".join(map(str, parts)).encode(), digest_size=8).digest(), "big") >> 1


def run_searches(
    cfg: AFlowConfig,
    optimizer: OptimizerModel | FrozenAPIOptimizer,
    seeds: list[int],
    tag: str,
    benchmarks: list[str] | None = None,
) -> list[dict]:
    """Run one search per benchmark and seed to its end, all stepped together; returns every transition in order."""
    names = benchmarks or cfg.trained_benchmarks()
    keys = [(b, s) for b in names for s in seeds]
    envs = {k: WorkflowEnv(cfg.model_copy(update={"run_name": f"{cfg.run_name}-{tag}"})) for k in keys}
    obs = {k: env.reset(*k) for k, env in envs.items()}
    transitions: list[dict] = []
    t = 0
    while active := [k for k, env in envs.items() if not env.done]:
        t += 1
        # One seed per search and step: a search draws the same edits whether it runs alone (one Ray task per
        # search in the flow) or batched with others (in-process); one seed per batch made the flow's
        # parallel searches identical draws of each other.
        picks = optimizer.act(
            [obs[k] for k in active], [_seed(tag, t, b, s) for b, s in active], envs=[envs[k] for k in active]
        )
        for (b, s), pick in zip(active, picks):
            before = obs[b, s]
            obs[b, s], reward, _done, info = envs[b, s].step(pick["text"])
            transitions.append(
                {
                    "search": f"{b}-s{s}",
                    "benchmark": b,
                    "t": t,
                    "reward": reward,
                    "anchor": before.anchor,
                    "completion": pick,
                    "invalid": info["invalid"],
                    "best": info.get("best"),
                    "outcome": info.get("outcome"),
                }
            )
    return transitions


def training_seeds(cfg: AFlowConfig, iteration: int) -> list[int]:
    """The fresh search seeds of one iteration (a hash of run seed, iteration and search index)."""
    return [_seed(cfg.seed, "train", iteration, j) % 10**9 for j in range(cfg.optimizer_rl.searches)]


def _figures(trans: list[dict]) -> dict[str, float]:
    ends = [tr for tr in trans if tr["outcome"] is not None]
    adv = [tr["advantage"] for tr in trans]
    return {
        "best": statistics.fmean(tr["best"] for tr in ends),
        "outcome": statistics.fmean(tr["outcome"] for tr in ends),
        "reward": statistics.fmean(tr["reward"] for tr in trans),
        "invalid": float(sum(tr["invalid"] for tr in trans)),
        "transitions": float(len(trans)),
        "adv_mean": statistics.fmean(adv),
        "adv_std": statistics.pstdev(adv) if len(adv) > 1 else 0.0,
    }


def transition_batch(iteration: int, trans: list[dict]) -> RoundBatch:
    """An iteration's credited transitions as the optimizer's round batch: each choice (kept as
    `Completion.sample_fields()` made it) becomes a sample with its reward, advantage and episode (the search)."""
    samples: list[Sample] = [
        {
            **tr["completion"],
            "role": ROLE,
            "task_id": tr["search"],
            "group": tr["anchor"],
            "reward": tr["reward"],
            "advantage": tr["advantage"],
        }
        for tr in trans
    ]
    return RoundBatch(iteration, {ROLE: samples})


def learn(cfg: AFlowConfig, optimizer: OptimizerModel, trans: list[dict], iteration: int) -> dict[str, float]:
    """GiGPO advantages over one iteration's transitions, one update; the iteration's figures.

    Unprefixed figures are over every search; `<benchmark>/<figure>` over that benchmark's searches.
    """
    rl = cfg.optimizer_rl
    for tr, a in zip(trans, step_advantages(trans, rl.gamma, rl.step_weight)):
        tr["advantage"] = a
    metrics = optimizer.update(transition_batch(iteration, trans))
    per_benchmark = {
        f"{b}/{k}": v
        for b in dict.fromkeys(tr["benchmark"] for tr in trans)
        for k, v in _figures([tr for tr in trans if tr["benchmark"] == b]).items()
    }
    return {**_figures(trans), **per_benchmark, **{f"optimizer/{k}": float(v) for k, v in metrics.items()}}


def train_iteration(cfg: AFlowConfig, optimizer: OptimizerModel, iteration: int) -> dict[str, float]:
    """Searches with fresh seeds run to their end in this process, then `learn`."""
    trans = run_searches(cfg, optimizer, training_seeds(cfg, iteration), f"it{iteration}")
    return learn(cfg, optimizer, trans, iteration)


def transition_items(run: str, iteration: int, trans: list[dict]) -> list[dict]:
    """Experience-pool items, one per transition (anchor: the parent workflow; role 'aflow-optimizer').

    Not `RoundBatch.items`: an item keeps the whole transition (search step, best score, outcome) that a
    sample does not carry, in the layout older pools hold; the envelope is the same `pool_item`."""
    return [
        pool_item(
            f"{run}/{iteration}/{tr['search']}/{tr['t']}",
            run,
            iteration,
            ROLE,
            tr["anchor"],
            tr.get("advantage"),
            {k: tr[k] for k in ("search", "t", "reward", "invalid", "best", "outcome", "completion")}
            | {"advantage": tr.get("advantage")},
            benchmark=tr["benchmark"],
        )
        for tr in trans
    ]


def train_local(cfg: AFlowConfig, log=print) -> tuple[OptimizerModel, list[dict]]:
    """All iterations in this process (tests, benchmarks); checkpoints the optimizer after each."""
    torch.manual_seed(cfg.seed)
    optimizer = make_optimizer(cfg)
    history = []
    for it in range(1, cfg.optimizer_rl.iterations + 1):
        figures = train_iteration(cfg, optimizer, it)
        optimizer.save(cfg.run_dir() / "optimizer" / f"iteration_{it:04d}")
        history.append({"iteration": it, **figures})
        log(
            f"iteration {it}: mean best {figures['best']:.3f} outcome {figures['outcome']:+.3f} "
            f"({int(figures['transitions'])} steps, {int(figures['invalid'])} invalid)"
        )
    return optimizer, history
