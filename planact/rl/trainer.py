"""Per-role trainer: GRPO updates over one causal LM (the supervised warm start: planact.rl.sft)."""

from __future__ import annotations

import contextlib
import copy
import random
import time

import torch

from planact import lora
from planact.config import RLConfig
from planact.rl.data_parallel import DataParallel
from planact.rl.eager_optim import adamw
from planact.rl.grpo import grpo_loss
from planact.rl.logprobs import make_batch, token_logprobs
from planact.rl.sampler_gap import GapMeter, check_fresh, check_stale, previous_version
from planact.rl.sft import demo_loss, sft, sft_continuation  # noqa: F401  (their home until they moved to rl/sft.py)
from planact.samples import Sample

# What grpo_loss reports per step (kl only with a reference model; entropy always here).
STEP_STATS = ("clip_frac", "entropy", "kl", "loss", "pg_loss")


def _warmup_lambda(warmup: int):
    return lambda step: min(1.0, (step + 1) / warmup) if warmup > 0 else 1.0


class RoleTrainer:
    """GRPO (clipped ratio, optional KL to a frozen reference, optional entropy) with AdamW."""

    def __init__(self, model: torch.nn.Module, pad_id: int, rl: RLConfig, temperature: float):
        self.model = model
        self.pad_id = pad_id
        self.rl = rl
        # Logprobs are taken at the sampling temperature, the distribution the engine sampled from.
        self.temperature = temperature if temperature > 0 else 1.0
        self.ref_model: torch.nn.Module | None = None
        # A LoRA model's reference is itself with adapters off: set once KL is on, no copy of the weights.
        self.ref_is_base = False
        self.optimizer = adamw(
            lora.trainable(model), rl.compile, lr=rl.lr, weight_decay=rl.weight_decay, fused=rl.fused_adamw or None
        )
        # The training forward may be compiled; it shares the parameters, so sync and checkpoints are unchanged.
        self.forward_model = torch.compile(model) if rl.compile else model
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(self.optimizer, _warmup_lambda(rl.warmup_steps))
        self.steps = 0
        # The sampler/trainer logprob check (planact.rl.sampler_gap): the adapters of the version before this
        # one (what stale samples claim), and the meter the first minibatch's forward adds fresh samples to.
        self._previous: dict | None = None
        self._gap: GapMeter | None = None

    def like(self, model: torch.nn.Module) -> RoleTrainer:
        """A fresh trainer with this one's settings over another model (a sharded replica)."""
        return RoleTrainer(model, self.pad_id, self.rl, self.temperature)

    def snapshot_reference(self) -> None:
        """Freeze the current weights as the KL reference (after the warm start, or at RL's first step without one)."""
        self._previous = None  # the warm start changed the weights: no version before them to check against
        if self.rl.kl_coef > 0 and lora.is_lora(self.model):
            self.ref_is_base = True  # the choice: the base model, not the adapter's warm start
        elif self.rl.kl_coef > 0:
            self.ref_model = copy.deepcopy(self.model).eval()
            for p in self.ref_model.parameters():
                p.requires_grad_(False)

    def train_step(self, samples: list[Sample], dp: DataParallel | None = None) -> dict[str, float]:
        """One GRPO update over a round's samples of this role, split into num_minibatches steps.

        Each sample: prompt_ids, token_ids, logprobs (from the engine), advantage. With `dp` this
        process is one rank of a data-parallel group: every rank gets all samples, trains on its
        token-balanced share of each chunk, and the gradients are summed before each optimizer step.
        """
        t0 = time.perf_counter()
        rl = self.rl
        for s in samples:  # a missing logprob would silently become 0 and distort every ratio
            if len(s["logprobs"]) != len(s["token_ids"]):
                raise ValueError(
                    f"sample {s.get('sample_id', '?')}: {len(s['logprobs'])} logprobs for "
                    f"{len(s['token_ids'])} tokens; the engine must return one logprob per token"
                )
        if rl.kl_coef > 0 and self.ref_model is None and not self.ref_is_base:
            # No warm start snapshotted a reference: the weights RL starts from are the reference.
            self.snapshot_reference()
        # Zero-advantage samples carry no policy gradient; without KL/entropy terms they are pure cost.
        if rl.kl_coef == 0 and rl.entropy_coef == 0:
            used = [s for s in samples if s["advantage"] != 0.0]
        else:
            used = list(samples)
        metrics = {
            "n_samples": float(len(samples)),
            "frac_zero_adv": 1.0 - len(used) / max(1, len(samples)),
            **staleness_stats(samples),
        }
        # These weights are the version the next round's stale samples will claim (the worker publishes one
        # version per step, a skipped one included): keep them before this step changes them.
        previous, self._previous = self._previous, previous_version(self.model)
        gap = GapMeter()
        if not used:
            if dp is None:  # nothing to train, so no training forward to measure on: a small one of its own
                check_stale(self, samples, previous, gap)
                check_fresh(self, samples, gap)
            return {
                **metrics,
                **gap.metrics(rl.precision),
                "loss": 0.0,
                "pg_loss": 0.0,
                "kl": 0.0,
                "entropy": 0.0,
                "clip_frac": 0.0,
                "grad_norm": 0.0,
                "tokens_per_s": 0.0,
                "lr": self.scheduler.get_last_lr()[0],
                "skipped": 1.0,
            }
        used, stale_stats = self._with_proximal(used)
        metrics.update(stale_stats)
        check_stale(self, used, previous, gap)
        random.Random(self.steps).shuffle(used)
        n_mb = min(rl.num_minibatches, len(used))
        chunks = [used[i::n_mb] for i in range(n_mb)]
        agg: dict[str, float] = {}
        n_tokens = 0
        self.model.train()
        for i_chunk, chunk in enumerate(chunks):
            self._gap = gap if i_chunk == 0 else None  # before the first optimizer step: the claimed weights
            # The chunk's token mean, however the chunk is split: each part weighs by its share of tokens.
            chunk_tokens = max(1, sum(len(s["token_ids"]) for s in chunk))
            mine = dp.share(chunk) if dp is not None else chunk
            self.optimizer.zero_grad(set_to_none=True)
            stats: dict[str, float] = {}
            if mine:
                weight = sum(len(s["token_ids"]) for s in mine) / chunk_tokens
                # FSDP averages gradients over the ranks where the unsharded path sums them.
                scale = 1.0 if dp is None else (weight * dp.world if dp.sharded else weight)
                stats = self._backward(mine, scale)
                if dp is not None:
                    stats = {k: v * weight for k, v in stats.items()}
            elif dp is not None and dp.sharded:
                # A sharded forward gathers parameters with every rank: one with nothing to train still
                # takes part, on a sample whose loss counts zero.
                (self._loss(chunk[:1])[0] * 0.0).backward()
            if dp is not None:  # the same keys on every rank, also one with no samples in this chunk
                if not dp.sharded:  # FSDP reduce-scatters the gradients itself during backward
                    dp.all_reduce_grads(self.model)
                stats = dict(zip(STEP_STATS, dp.all_reduce_sum([stats.get(k, 0.0) for k in STEP_STATS])))
            norm = torch.nn.utils.clip_grad_norm_(lora.trainable(self.model), rl.grad_clip)
            stats["grad_norm"] = float(norm.full_tensor() if hasattr(norm, "full_tensor") else norm)
            stats["lr"] = self.scheduler.get_last_lr()[0]
            self.optimizer.step()
            self.scheduler.step()
            self.steps += 1
            n_tokens += sum(len(s["token_ids"]) for s in mine)
            for k, v in stats.items():
                agg[k] = agg.get(k, 0.0) + v / len(chunks)
        self._gap = None
        agg.setdefault("kl", 0.0)
        dt = time.perf_counter() - t0
        return {
            **metrics,
            **gap.metrics(rl.precision),
            **agg,
            "tokens_per_s": n_tokens / dt,
            "train_time_s": dt,
            "skipped": 0.0,
        }

    @torch.no_grad()
    def _with_proximal(self, samples: list[dict]) -> tuple[list[dict], dict[str, float]]:
        """Stale samples (drawn by older weights than the trainer's) get the current policy's logprobs.

        Decoupled PPO (as AReaL): the clip is taken around this proximal policy, the weights before this
        update, and pi_prox / pi_behav re-weights each token for the sampler's staleness. Fresh samples
        are left as they are: their engine logprobs are the proximal policy (measured equal to 2.4e-6)."""
        stale = [i for i, s in enumerate(samples) if s.get("staleness", 0) > 0]
        if not stale:
            return samples, {}
        out = list(samples)
        weights: list[torch.Tensor] = []
        was_training = self.model.training
        self.model.eval()
        for k in range(0, len(stale), 64):  # bounded forward batches
            idx = stale[k : k + 64]
            rows = [samples[i] for i in idx]
            batch, starts = self._batch(rows, "cpu")
            lp, _ = token_logprobs(self.model, batch, self.temperature)
            lp = lp.cpu()  # compared with the engine's logprobs, which are CPU floats
            for (row, col), i, s in zip(starts, idx, rows):
                prox = lp[row, col : col + len(s["token_ids"])]
                out[i] = {**s, "prox_logprobs": prox.tolist()}
                weights.append((prox - torch.tensor(s["logprobs"])).exp())
        self.model.train(was_training)
        w = torch.cat(weights) if weights else torch.ones(1)
        return out, {
            "stale_weight_mean": float(w.clamp(max=self.rl.stale_weight_cap).mean()),
            "stale_weight_capped": float((w >= self.rl.stale_weight_cap).float().mean()),
        }

    def micro_batches(self, rows: list[dict]) -> list[list[dict]]:
        """`rows` in micro-batches of at most rl.micro_batch_tokens tokens (all in one when 0).

        Padded, a micro-batch costs rows x its longest row; packed, the sum of its rows' lengths."""
        budget = self.rl.micro_batch_tokens
        if budget <= 0:
            return [rows]
        parts: list[list[dict]] = []
        part: list[dict] = []
        used = 0
        for row in sorted(rows, key=lambda r: len(r["prompt_ids"]) + len(r["token_ids"])):
            width = len(row["prompt_ids"]) + len(row["token_ids"])  # sorted: the longest row so far
            cost = used + width if self.rl.packed else (len(part) + 1) * width
            if part and cost > budget:
                parts.append(part)
                part, cost = [], width
            part.append(row)
            used = cost
        return [*parts, part] if part else parts

    def _batch(self, rows: list[dict], device) -> tuple[dict[str, torch.Tensor], list[tuple[int, int]]]:
        """The rows as one padded or packed (rl.packed) batch, and each row's first response (row, column)."""
        prompts, responses = [s["prompt_ids"] for s in rows], [s["token_ids"] for s in rows]
        return make_batch(prompts, responses, self.pad_id, device, packed=self.rl.packed)

    def _autocast(self):
        if self.rl.precision != "bf16":
            return contextlib.nullcontext()
        device = next(self.model.parameters()).device
        return torch.autocast(device.type, dtype=torch.bfloat16)

    def _backward(self, rows: list[dict], scale: float = 1.0) -> dict[str, float]:
        """Backward of the rows' token-mean loss (times `scale`), micro-batch by micro-batch; the rows' statistics.

        Each micro-batch's token mean weighs by its share of the rows' response tokens, so the summed
        gradient is the whole batch's token-mean gradient however the rows are split."""
        total = max(1, sum(len(r["token_ids"]) for r in rows))
        stats: dict[str, float] = {}
        for part in self.micro_batches(rows):
            share = sum(len(r["token_ids"]) for r in part) / total
            with self._autocast():
                loss, part_stats, _ = self._loss(part)
            (loss * (share * scale)).backward()
            for k, v in part_stats.items():
                stats[k] = stats.get(k, 0.0) + v * share
        return stats

    def _loss(self, chunk: list[dict]) -> tuple[torch.Tensor, dict[str, float], int]:
        """GRPO loss (token mean) of a list of samples, its statistics, and its response-token count."""
        rl = self.rl
        device = next(self.model.parameters()).device
        batch, starts = self._batch(chunk, device)
        mask = batch["resp_mask"]
        old = torch.zeros(mask.shape)
        # One advantage per token: a packed row holds several samples.
        adv = torch.zeros(mask.shape)
        behav_w = None
        for (row, start), s in zip(starts, chunk):
            span = slice(start, start + len(s["logprobs"]))
            old[row, span] = torch.tensor(s.get("prox_logprobs", s["logprobs"]))
            adv[row, span] = s["advantage"]
            if "prox_logprobs" in s:
                if behav_w is None:
                    behav_w = torch.ones(mask.shape)
                w = (torch.tensor(s["prox_logprobs"]) - torch.tensor(s["logprobs"])).exp()
                behav_w[row, span] = w.clamp(max=rl.stale_weight_cap)
        # Filled sample by sample on the CPU (cheap indexing), then moved once beside the model's logprobs.
        old, adv = old.to(device), adv.to(device)
        behav_w = behav_w.to(device) if behav_w is not None else None
        logp, ent = token_logprobs(self.forward_model, batch, self.temperature, with_entropy=True)
        if self._gap is not None:  # fresh samples: the engine's logprobs against this very forward's
            for (row, start), s in zip(starts, chunk):
                if "prox_logprobs" not in s:
                    self._gap.add(logp[row, start : start + len(s["logprobs"])], torch.tensor(s["logprobs"]))
        ref_lp = None
        if self.ref_model is not None:
            with torch.no_grad():
                ref_lp, _ = token_logprobs(self.ref_model, batch, self.temperature)
        elif self.ref_is_base:
            with torch.no_grad(), lora.adapters_off(self.model):
                ref_lp, _ = token_logprobs(self.model, batch, self.temperature)
        loss, stats = grpo_loss(
            logp,
            old,
            adv,
            mask,
            eps_clip=rl.eps_clip,
            eps_clip_high=rl.eps_clip_high,
            clip_ratio_c=rl.clip_ratio_c,
            ref_logp=ref_lp,
            kl_coef=rl.kl_coef,
            kl_estimator=rl.kl_estimator,
            entropy=ent.detach() if rl.entropy_coef == 0 else ent,
            entropy_coef=rl.entropy_coef,
            behav_weight=behav_w,
        )
        return loss, stats, int(mask.sum())

    def state_dict(self) -> dict:
        """Optimizer, scheduler and step count (weights are saved with save_pretrained)."""
        return {
            "optimizer": self.optimizer.state_dict(),
            "scheduler": self.scheduler.state_dict(),
            "steps": self.steps,
            "ref_model": self.ref_model.state_dict() if self.ref_model is not None else None,
            "ref_is_base": self.ref_is_base,
        }

    def load_state_dict(self, state: dict) -> None:
        """Restore what state_dict() saved."""
        self.optimizer.load_state_dict(state["optimizer"])
        self.scheduler.load_state_dict(state["scheduler"])
        self.steps = state["steps"]
        self._previous = None  # restored weights: the version before them is not held
        self.ref_is_base = bool(state.get("ref_is_base", False))
        if state.get("ref_model") is not None:
            self.ref_model = copy.deepcopy(self.model).eval()
            self.ref_model.load_state_dict(state["ref_model"])
            for p in self.ref_model.parameters():
                p.requires_grad_(False)


def staleness_stats(samples: list[dict]) -> dict[str, float]:
    """How many weight versions behind the trainer the round's samples were drawn (0 = synchronous)."""
    seen = [s.get("staleness", 0) for s in samples] or [0]
    return {"staleness_mean": sum(seen) / len(seen), "staleness_max": float(max(seen))}
