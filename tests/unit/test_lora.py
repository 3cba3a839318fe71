"""LoRA roles: a step moves only the adapters, sync ships only them, the KL reference is the base with
adapters off, and a checkpoint (adapter + named base) restores the same policy."""

from pathlib import Path

import pytest
import torch

from planact.config import load_config

from .test_trainer import _seq_logprob as _logprob  # a sample's summed response logprob under a model

SMOKE = Path(__file__).resolve().parents[2] / "configs" / "smoke.yaml"


def _cfg(tmp_path, *extra):
    return load_config(
        SMOKE,
        [
            f"checkpoint.root={tmp_path}",
            "planner.lora.enabled=true",
            "planner.lora.rank=4",
            "planner.rl.lr=0.01",
            "planner.rl.warmup_steps=0",
            "planner.rl.num_minibatches=1",
            *extra,
        ],
    )


def _samples(worker):
    (group,) = worker.generate(["sort the digits ="], n=2, seed=1)
    return [
        {
            "prompt_ids": c.prompt_ids,
            "token_ids": c.token_ids,
            "logprobs": c.logprobs,
            "advantage": a,
            "weight_version": c.weight_version,
        }
        for c, a in zip(group, (1.0, -1.0))
    ]


def test_lora_step_moves_only_adapters_and_a_replica_serves_them_after_sync(tmp_path):
    from planact.role_spec import role_spec
    from planact.workers import RoleWorker

    cfg = _cfg(tmp_path)
    trainer = RoleWorker(role_spec(cfg, "planner"), 0, with_trainer=True)
    replica = RoleWorker(role_spec(cfg, "planner"), 1, with_trainer=False)
    before = {k: v.clone() for k, v in trainer.model.state_dict().items()}
    samples = _samples(trainer)
    pad = trainer.tokenizer.pad_token_id
    lp0 = [_logprob(trainer.model, s, pad) for s in samples]
    trainer.train(samples)
    after = trainer.model.state_dict()
    moved = {k for k in before if not torch.equal(before[k], after[k])}
    assert moved and all("lora_" in k for k in moved)  # the base weights are bit-for-bit the same
    assert _logprob(trainer.model, samples[0], pad) > lp0[0] and _logprob(trainer.model, samples[1], pad) < lp0[1]

    weights, version = trainer.get_weights()
    assert weights and all("lora_" in k for k in weights)  # only the adapters travel
    full = sum(v.numel() for v in before.values())
    assert sum(v.numel() for v in weights.values()) < 0.2 * full
    replica.update_weights(weights, version)
    assert replica.engine.weight_version == version
    for s in samples:  # the replica's engine now computes the trainer's policy
        assert _logprob(replica.model, s, pad) == pytest.approx(_logprob(trainer.model, s, pad), abs=1e-5)


def test_lora_kl_reference_is_the_base_with_adapters_off(tmp_path):
    from planact import lora
    from planact.initial_models import initial_model_path
    from planact.models import load_model
    from planact.role_spec import role_spec
    from planact.workers import RoleWorker

    cfg = _cfg(tmp_path, "planner.rl.kl_coef=0.1")
    worker = RoleWorker(role_spec(cfg, "planner"), 0, with_trainer=True)
    samples = _samples(worker)
    worker.train(samples)
    m = worker.train(_samples(worker))
    assert worker.trainer.ref_model is None and worker.trainer.ref_is_base  # no second copy of the model
    assert m["kl"] > 0
    base, _ = load_model(initial_model_path(cfg, "planner"))
    pad = worker.tokenizer.pad_token_id
    with lora.adapters_off(worker.model):
        off = _logprob(worker.model, samples[0], pad)
    assert off == pytest.approx(_logprob(base, samples[0], pad), abs=1e-5)
    assert _logprob(worker.model, samples[0], pad) != pytest.approx(off, abs=1e-4)


def test_lora_checkpoint_holds_the_adapter_and_its_base_and_restores_the_policy(tmp_path):
    from planact.models import load_model
    from planact.role_spec import role_spec
    from planact.workers import RoleWorker

    cfg = _cfg(tmp_path)
    worker = RoleWorker(role_spec(cfg, "planner"), 0, with_trainer=True)
    samples = _samples(worker)
    worker.train(samples)
    out = Path(worker.save_checkpoint(str(tmp_path / "ckpt")))
    assert (out / "adapter_model.safetensors").is_file() and not (out / "model.safetensors").exists()
    pad = worker.tokenizer.pad_token_id
    want = _logprob(worker.model, samples[0], pad)
    loaded, _ = load_model(out)  # the base named in the checkpoint, the adapter over it
    assert _logprob(loaded, samples[0], pad) == pytest.approx(want, abs=1e-5)
    fresh = RoleWorker(role_spec(cfg, "planner"), 0, with_trainer=True)
    assert fresh.load_checkpoint(str(tmp_path / "ckpt")) == worker.engine.weight_version
    assert _logprob(fresh.model, samples[0], pad) == pytest.approx(want, abs=1e-5)
    # a role that starts from the checkpoint (model_path) goes on training that adapter
    onward = RoleWorker(role_spec(_cfg(tmp_path, f"planner.model_path={out}"), "planner"), 0, with_trainer=True)
    assert _logprob(onward.model, samples[0], pad) == pytest.approx(want, abs=1e-5)
    before = {k: v.clone() for k, v in onward.model.state_dict().items()}
    onward.train(samples)
    moved = {k for k, v in onward.model.state_dict().items() if not torch.equal(v, before[k])}
    assert moved and all("lora_" in k for k in moved)


@pytest.mark.parametrize(
    "override, field",
    [
        ("planner.engine=sglang", "lora.enabled"),
        ("planner.train=false", "lora.enabled"),
        ("planner.lora.rank=0", "lora.rank"),
    ],
)
def test_lora_config_errors_name_the_field(tmp_path, override, field):
    with pytest.raises(Exception, match=field.replace(".", r"\.")):
        _cfg(tmp_path, override)


def test_a_registered_lora_version_loads_as_a_pipeline_and_resolves_to_adapter_plus_base(tmp_path):
    """The registry keeps the adapter and a reference to its base: MLflow's loader builds a working
    text-generation pipeline from them, and planact resolves the version back to the same policy."""
    import mlflow.transformers
    from mlflow import MlflowClient

    from planact.models import load_model
    from planact.registry import register_checkpoint, resolve_model, tracking
    from planact.role_spec import role_spec
    from planact.workers import RoleWorker

    cfg = _cfg(tmp_path)
    worker = RoleWorker(role_spec(cfg, "planner"), 0, with_trainer=True)
    samples = _samples(worker)
    worker.train(samples)
    worker.save_checkpoint(str(tmp_path / "ckpt"))
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    run_id = MlflowClient(uri).create_run(MlflowClient(uri).create_experiment("lora")).info.run_id
    assert register_checkpoint(cfg, uri, run_id, tmp_path / "ckpt", 1, {}, ["planner"]) == {"planner": 1}
    with tracking(uri):
        pipe = mlflow.transformers.load_model("models:/smoke-planner/1")
    out = pipe("sort the digits =", max_new_tokens=4, do_sample=False)
    assert isinstance(out[0]["generated_text"], str)
    local = resolve_model("models:/smoke-planner/1", uri, cache_root=tmp_path / "cache")
    assert (local / "adapter_model.safetensors").is_file()
    model, _ = load_model(local)
    pad = worker.tokenizer.pad_token_id
    assert _logprob(model, samples[0], pad) == pytest.approx(_logprob(worker.model, samples[0], pad), abs=1e-5)
