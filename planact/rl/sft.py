"""The supervised warm start of a role (cross-entropy on teacher demonstrations, to a plateau), its held-out
loss, and the equal-time SFT control of an RL run."""

from __future__ import annotations

import math
import random
import time

import torch

from planact import lora
from planact.config import WarmStartConfig
from planact.progress import Phase, ProgressFn
from planact.rl.eager_optim import adamw
from planact.rl.logprobs import make_batch, token_logprobs


def _cosine_lambda(total: int, warmup: int, final_ratio: float):
    def f(step: int) -> float:
        if step < warmup:
            return (step + 1) / warmup
        progress = min(1.0, (step - warmup) / max(1, total - warmup))
        return final_ratio + (1 - final_ratio) * 0.5 * (1 + math.cos(math.pi * progress))

    return f


def sft(
    model: torch.nn.Module,
    pad_id: int,
    demos: list[tuple[list[int], list[int]]],
    cfg: WarmStartConfig,
    seed: int = 0,
    steps: int | None = None,
    log_every: int = 50,
    progress: ProgressFn | None = None,
    what: str = "warm start",
) -> list[dict[str, float]]:
    """Cross-entropy on (prompt_ids, target_ids) demonstrations with a cosine-annealed AdamW.

    With `cfg.patience`, the last `cfg.heldout` demonstrations are kept out, their loss is measured
    every `cfg.eval_every` steps, and training stops at the plateau (no relative improvement of
    `cfg.min_delta` for `patience` evaluations), restoring the best weights. Returns the loss curve
    (every `log_every` steps; held-out evaluations carry `heldout_loss`) so a caller can show the plateau.
    `progress` hears every step as `what` k of n (a pretrained role's warm start takes minutes).
    """
    steps = cfg.steps if steps is None else steps
    heldout: list = []
    if cfg.patience and len(demos) > 2 * cfg.heldout:
        demos, heldout = demos[: -cfg.heldout], demos[-cfg.heldout :]
    opt = adamw(lora.trainable(model), lr=cfg.lr, weight_decay=0.0)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, _cosine_lambda(steps, cfg.warmup_steps, cfg.final_lr_ratio))
    rng = random.Random(seed)
    curve: list[dict[str, float]] = []
    running = 0.0
    best, best_state, bad = float("inf"), None, 0
    model.train()
    device = next(model.parameters()).device
    phase = Phase(what, steps, progress)
    for step in range(steps):
        batch_demos = [demos[rng.randrange(len(demos))] for _ in range(cfg.batch_size)]
        opt.zero_grad(set_to_none=True)
        # Mean over every target token of the batch, accumulated micro-batch by micro-batch: the same gradient
        # as one pass, with the activations of only `micro_batch_size` demonstrations alive at a time.
        tokens = sum(len(d[1]) for d in batch_demos)
        size = cfg.micro_batch_size or cfg.batch_size
        loss = 0.0
        for i in range(0, cfg.batch_size, size):
            part = batch_demos[i : i + size]
            batch, _ = make_batch([d[0] for d in part], [d[1] for d in part], pad_id, device, cfg.packed)
            logp, _ = token_logprobs(model, batch)
            part_loss = -(logp * batch["resp_mask"]).sum() / tokens
            part_loss.backward()
            loss += part_loss.detach()
        torch.nn.utils.clip_grad_norm_(lora.trainable(model), 1.0)
        opt.step()
        sched.step()
        running += float(loss.detach())
        phase.advance()
        if (step + 1) % log_every == 0 or step + 1 == steps:
            n = (step % log_every) + 1
            curve.append({"step": step + 1, "loss": running / n, "lr": sched.get_last_lr()[0]})
            running = 0.0
        if heldout and ((step + 1) % cfg.eval_every == 0 or step + 1 == steps):
            held = demo_loss(model, pad_id, heldout, cfg.batch_size, cfg.packed)
            curve.append({"step": step + 1, "heldout_loss": held})
            if held < best * (1.0 - cfg.min_delta):
                best, bad = held, 0
                best_state = {k: v.detach().clone() for k, v in model.state_dict().items()}
            else:
                bad += 1
                if bad >= cfg.patience:
                    phase.finish(note=f"plateau of the held-out loss at {best:.4f}")
                    break  # the plateau: more steps at this schedule no longer pay
    if best_state is not None:
        model.load_state_dict(best_state)
        curve.append({"step": curve[-1]["step"], "best_heldout_loss": best})
    return curve


@torch.no_grad()
def demo_loss(
    model: torch.nn.Module,
    pad_id: int,
    demos: list[tuple[list[int], list[int]]],
    batch_size: int,
    packed: bool = False,
) -> float:
    """Mean per-token cross-entropy of the model on demonstrations (no gradient), padded or packed."""
    total, tokens = 0.0, 0.0
    device = next(model.parameters()).device
    for i in range(0, len(demos), batch_size):
        chunk = demos[i : i + batch_size]
        batch, _ = make_batch([d[0] for d in chunk], [d[1] for d in chunk], pad_id, device, packed)
        logp, _ = token_logprobs(model, batch)
        total += float(-(logp * batch["resp_mask"]).sum())
        tokens += float(batch["resp_mask"].sum())
    return total / max(tokens, 1.0)


def sft_continuation(workers, demos: dict[str, list], cfg, seconds: float, seed: int, chunk: int = 20) -> int:
    """The equal-time control of an RL run: continue each role's SFT on its demonstrations for `seconds`.

    Roles alternate in chunks of at most `chunk` steps at the annealed warm start's final learning rate,
    held constant (a continuation, not a restart). `workers` have role, model and tokenizer; returns the
    steps taken.
    """
    steps, t0 = 0, time.perf_counter()
    step_s: dict[str, float] = {}
    while time.perf_counter() - t0 < seconds:
        for w in workers:
            if time.perf_counter() - t0 >= seconds:
                break
            # A pretrained role's step can take seconds: its first chunk is one step, timed, and later chunks
            # last at most a twentieth of the budget, so the control overshoots its time by little.
            n = 1 if w.role not in step_s else max(1, min(chunk, int(seconds / 20 / step_s[w.role])))
            ws = getattr(cfg, w.role).warm_start
            # patience 0: a continuation trains for its time; a held-out check at each chunk's end would spend
            # the control's budget on evaluation (and keep 256 demonstrations out of its training)
            cont = ws.model_copy(
                update={"lr": ws.lr * ws.final_lr_ratio, "final_lr_ratio": 1.0, "warmup_steps": 0, "patience": 0}
            )
            t = time.perf_counter()
            sft(w.model, w.tokenizer.pad_token_id, demos[w.role], cont, seed=seed + steps, steps=n, log_every=n)
            step_s[w.role] = (time.perf_counter() - t) / n
            steps += n
    return steps
