"""Do the weights that sampled a round equal the ones it claims? The sampler/trainer logprob gap.

Every sample carries the engine's logprob of each token it drew and the weight version it drew them with
(`staleness` versions behind the trainer). With weight sync working, the trainer's logprobs under that
version equal the engine's to float rounding; an adapter that never reached the engine (verl #7495) shows
here as a gap that grows with every update, instead of passing for staleness for months.

Where it is measured, so that it costs (almost) nothing:
  fresh samples (staleness 0): in the training pass's first minibatch, before the optimizer steps, when the
    trainer's weights are the version they claim (the forward the loss needs anyway);
  stale samples (pipelined rounds, staleness 1): in the proximal pass, under the version before the
    trainer's. A LoRA role keeps that version's adapters (a few MB on the CPU) and scores at most
    CHECK_SAMPLES stale samples under them (one bounded extra forward); a full-weight role keeps no
    second copy of its model and reports no gap for stale samples;
  a round with nothing to train (every advantage zero and no KL or entropy term: no training forward) scores
    at most CHECK_SAMPLES fresh samples in a forward of their own (not in a data-parallel group, whose
    ranks would have to take part).
Tolerance and measured gaps: docs/engines.md ("Weights that reach the sampler").
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from planact import lora

if TYPE_CHECKING:
    import torch

# Samples scored by an extra forward (stale ones of a LoRA role; fresh ones of a round with nothing to train):
# ~1,000 tokens tell a float-rounding gap (1e-7) from a missing update (1e-1), at a fraction of a step's cost.
CHECK_SAMPLES = 8
# The mean gap a correct sync stays under, by the trainer's rl.precision (docs/engines.md): fp32 measured 0.5e-7
# to 1.2e-7 on the CPU; bf16 autocast 7e-4 to 8e-4 on fresh samples (the training forward runs in bf16, the
# engine in fp32: a real difference the first step's ratio sees). A missing adapter measured 0.14 and more.
TOLERANCE = {"fp32": 1e-4, "bf16": 1e-2}


class GapMeter:
    """Accumulates |trainer logprob - engine logprob| over response tokens: mean and max."""

    def __init__(self) -> None:
        self.total = 0.0
        self.tokens = 0
        self.max = 0.0

    def add(self, trainer_lp: torch.Tensor, sampler_lp: torch.Tensor) -> None:
        """One sample's response tokens: the trainer's logprobs and the engine's (same length)."""
        if trainer_lp.numel() == 0:
            return
        diff = (trainer_lp.detach().float().cpu() - sampler_lp.float().cpu()).abs()
        self.total += float(diff.sum())
        self.tokens += diff.numel()
        self.max = max(self.max, float(diff.max()))

    def metrics(self, precision: str = "fp32") -> dict[str, float]:
        """The round's figures (none when no token was checked): logged as `<role>/sampler_trainer_logprob_gap`;
        a gap over the tolerance of the trainer's `precision` is also said on the console."""
        if not self.tokens:
            return {}
        gap, tol = self.total / self.tokens, TOLERANCE.get(precision, TOLERANCE["fp32"])
        if gap > tol:  # every round it happens: a sync that never arrives must not pass for staleness
            print(
                f"sampler/trainer logprob gap {gap:.2e} over {self.tokens} tokens exceeds {tol:.0e} ({precision}): "
                "the engine is not sampling with the weights its samples claim (weight sync broken?)"
            )
        return {
            "sampler_trainer_logprob_gap": gap,
            "sampler_trainer_logprob_gap_max": self.max,
            "sampler_trainer_logprob_gap_over": float(gap > tol),
            "sampler_check_tokens": float(self.tokens),
        }


def previous_version(model: torch.nn.Module) -> dict | None:
    """What the next round's stale samples are checked against: a LoRA model's adapters now (a copy)."""
    return _copy(lora.adapter_state(model)) if lora.is_lora(model) else None


def _copy(state: dict) -> dict:
    # adapter_state() of a model on the CPU returns views of the live parameters (.cpu() does not copy there):
    # without a copy the "previous" version would follow every optimizer step.
    return {k: v.clone() for k, v in state.items()}


def check_stale(trainer, rows: list[dict], previous: dict | None, meter: GapMeter) -> None:
    """Score up to CHECK_SAMPLES stale rows under the `previous` adapters and add their gap to `meter`.

    The current adapters are put back whatever happens: the optimizer holds the same tensors, copied in place."""
    rows = [r for r in rows if r.get("staleness", 0) == 1][:CHECK_SAMPLES]
    if previous is None or not rows or not lora.is_lora(trainer.model):
        return
    current = _copy(lora.adapter_state(trainer.model))
    try:
        lora.load_adapter_state(trainer.model, previous)
        _score(trainer, rows, meter)
    finally:
        lora.load_adapter_state(trainer.model, current)


def check_fresh(trainer, rows: list[dict], meter: GapMeter) -> None:
    """Score up to CHECK_SAMPLES fresh rows under the current weights: for a round with nothing to train (every
    advantage zero, no KL or entropy term), which has no training forward to measure on."""
    rows = [r for r in rows if r.get("staleness", 0) == 0][:CHECK_SAMPLES]
    if rows:
        _score(trainer, rows, meter)


def _score(trainer, rows: list[dict], meter: GapMeter) -> None:
    import torch

    from planact.rl.logprobs import token_logprobs

    model = trainer.model
    was_training = model.training
    model.eval()
    try:
        batch, starts = trainer._batch(rows, "cpu")
        with torch.no_grad():
            lp, _ = token_logprobs(model, batch, trainer.temperature)
    finally:
        model.train(was_training)
    lp = lp.cpu()
    for (row, col), s in zip(starts, rows):
        meter.add(lp[row, col : col + len(s["token_ids"])], torch.tensor(s["logprobs"]))
