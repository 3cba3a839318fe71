"""Weights that really reach the sampler: each round's engine logprobs equal the trainer's under the weight
version the round claims (staleness 0: the trainer's; staleness 1: the one before), and an adapter that was
never pushed to the sampler (verl #7495) makes the logged gap exceed the tolerance."""

import pytest

from planact.rl.sampler_gap import TOLERANCE as TOLERANCES
from tests.unit.test_lora import _cfg as lora_config

ROUNDS = 4
TOLERANCE = TOLERANCES["fp32"]  # the rounds here train in fp32


def _samples(worker, round_idx: int) -> list[dict]:
    """A round of the sampler's completions, as the scorer hands them to training (engine logprobs + version)."""
    groups = worker.generate(["sort the digits =", "reverse 123 ="], n=4, seed=100 + round_idx)
    return [
        {
            "prompt_ids": c.prompt_ids,
            "token_ids": c.token_ids,
            "logprobs": c.logprobs,
            "advantage": 1.0 if j % 2 == 0 else -1.0,
            "weight_version": c.weight_version,
        }
        for group in groups
        for j, c in enumerate(group)
    ]


def _pair(tmp_path):
    """A LoRA role's trainer and, as a separate replica, the engine that samples for it (the pipelined layout)."""
    from planact.role_spec import role_spec
    from planact.workers import RoleWorker

    cfg = lora_config(tmp_path, "planner.rl.num_minibatches=2")
    spec = role_spec(cfg, "planner")
    return RoleWorker(spec, 0, with_trainer=True), RoleWorker(spec, 1, with_trainer=False)


def _run(tmp_path, staleness: int, broken: bool) -> list[dict]:
    """ROUNDS rounds as flows.rounds orders them: staleness 0 syncs before the next generation, staleness 1
    after it. Returns each round's metrics."""
    trainer, sampler = _pair(tmp_path)

    def sync() -> None:
        weights, version = trainer.get_weights()
        if broken:  # the bug: the version moves on, the adapter never reaches the sampler's model
            sampler.engine.update_weights(None, version)
        else:
            sampler.update_weights(weights, version)

    out, pending = [], _samples(sampler, 0)
    for r in range(1, ROUNDS + 1):
        out.append(trainer.train(pending))
        if staleness == 0:
            sync()
            pending = _samples(sampler, r)
        else:  # round r+1 generates while round r trains; round r's weights arrive after that generation
            pending = _samples(sampler, r)
            sync()
    return out


@pytest.mark.parametrize("staleness", [0, 1])
def test_every_round_samples_with_the_weights_it_claims(tmp_path, staleness):
    rounds = _run(tmp_path, staleness, broken=False)
    assert [m["staleness_max"] for m in rounds] == [0.0] + [float(staleness)] * (ROUNDS - 1)
    for r, m in enumerate(rounds, 1):
        assert m["sampler_check_tokens"] >= 20, f"round {r}: too few tokens checked"
        assert m["sampler_trainer_logprob_gap"] < TOLERANCE, f"round {r}: gap {m['sampler_trainer_logprob_gap']}"
        assert m["sampler_trainer_logprob_gap_max"] < 10 * TOLERANCE
        assert m["sampler_trainer_logprob_gap_over"] == 0.0


@pytest.mark.parametrize("staleness", [0, 1])
def test_an_adapter_never_pushed_to_the_sampler_shows_as_a_gap(tmp_path, staleness, capsys):
    rounds = _run(tmp_path, staleness, broken=True)
    gaps = [m["sampler_trainer_logprob_gap"] for m in rounds]
    # Until the first trained adapter should have reached the sampler, nothing is missing; from then on
    # (round 2 synchronous, round 3 pipelined) every round's gap is far over the tolerance.
    first_wrong = 2 + staleness
    assert all(g < TOLERANCE for g in gaps[: first_wrong - 1]), gaps
    assert all(g > 100 * TOLERANCE for g in gaps[first_wrong - 1 :]), gaps
    assert [m["sampler_trainer_logprob_gap_over"] for m in rounds] == [0.0] * (first_wrong - 1) + [1.0] * (
        ROUNDS - first_wrong + 1
    )
    # Said on the console every such round (in a run: the trainer agent's output, which Ray forwards).
    assert capsys.readouterr().out.count("weight sync broken?") == ROUNDS - first_wrong + 1


def test_a_round_with_nothing_to_train_still_checks_the_sampler(tmp_path):
    trainer, sampler = _pair(tmp_path)
    trainer.train(_samples(sampler, 0))  # the adapters move
    sampler.engine.update_weights(None, trainer.engine.weight_version)  # the version arrives, the adapter not
    idle = [{**s, "advantage": 0.0} for s in _samples(sampler, 1)]  # every reward equal: nothing to train
    m = trainer.train(idle)
    assert m["skipped"] == 1.0 and m["sampler_check_tokens"] >= 20
    assert m["sampler_trainer_logprob_gap"] > 100 * TOLERANCE and m["sampler_trainer_logprob_gap_over"] == 1.0
    sampler.update_weights(*trainer.get_weights())  # the sync done right
    m = trainer.train([{**s, "advantage": 0.0} for s in _samples(sampler, 2)])
    assert m["skipped"] == 1.0 and m["sampler_trainer_logprob_gap"] < TOLERANCE
