"""RoleWorker: one role's model, engine and (optionally) trainer in one process.

Created as a named Ray actor by planact.agents; usable in-process by tests and
benchmarks. Replica 0 of a role carries the trainer when `colocate_trainer`
is set, so weight sync to its own engine is a version bump; other replicas
receive the trainer's state_dict.

A worker receives its role's `RoleSpec` (planact.role_spec), not the whole run config; the warm start's
demonstrations come from the environment on the driver.
"""

from __future__ import annotations

import json
import os
import random
from pathlib import Path
from typing import TYPE_CHECKING

from planact import faults, lora
from planact.config import API_ENGINES
from planact.engines.base import Completion, SamplingParams
from planact.engines.factory import make_engine, needs_local_model
from planact.envs.base import RoundEnv
from planact.role_spec import RoleSpec
from planact.samples import Sample
from planact.storage import RunState, fsync_tree
from schedulemesh import AgentActor

# torch, transformers and the modules built on them are imported where they are used: the schedulemesh
# supervisor and Prefect task workers import this module to unpickle RoleWorker, never to run it, and
# those imports cost ~5 s of CPU in every such process (measured on 2 cores).
if TYPE_CHECKING:
    from planact.rl.trainer import RoleTrainer


class RoleWorker(AgentActor):
    """Engine (+ trainer) for one role; every method takes and returns small, picklable payloads.

    As a schedulemesh agent it reports its in-flight generations as load, and a replacement created
    by the supervisor after a crash restores the run's last checkpoint before it answers.
    """

    def __init__(self, spec: RoleSpec, replica: int = 0, with_trainer: bool = True, model_path: str | None = None):
        rc = spec.config
        self.spec, self.role, self.rc, self.replica = spec, spec.role, rc, replica
        self.model = self.tokenizer = None
        path = "" if rc.engine in API_ENGINES else (model_path or str(spec.initial_model()))
        # torch and transformers only where a model lives here: a frozen API role's agent imports neither
        # (~7 CPU-s and ~400 MB less per such agent, measured on 2 cores).
        if needs_local_model(rc, with_trainer):
            import torch

            from planact.models import load_model

            torch.set_num_threads(rc.resources.torch_threads)
            self.model, self.tokenizer = load_model(path, rc.resources.device, rc.attention_kernel)
            if rc.lora.enabled and not lora.is_lora(self.model):  # every replica: adapters ride the same base
                self.model = lora.apply_lora(self.model, rc.lora, seed=spec.seed)
        elif rc.engine == "sglang":
            from transformers import AutoTokenizer

            self.tokenizer = AutoTokenizer.from_pretrained(path)  # prompts go to the server as token ids
        self.engine = make_engine(rc, f"{self.role}-{replica}", path, self.model, self.tokenizer, spec.run_dir / "logs")
        self.trainer = self.leader = None
        if with_trainer:
            from planact.rl.trainer import RoleTrainer
            from planact.trainer_group import GroupLeader

            self.trainer = RoleTrainer(self.model, self.tokenizer.pad_token_id, rc.rl, rc.sampling.temperature)
            # trainer_workers > 1: this trainer is rank 0 of a data-parallel group (planact.trainer_group).
            if rc.resources.trainer_workers > 1:
                self.leader = GroupLeader(spec, self.model, self.trainer)
        if self.incarnation > 0:
            self.restore_latest()

    def restore_latest(self) -> int | None:
        """Load the run's last completed checkpoint of this role, if any; returns its weight version."""
        folder = RunState(self.spec.run_dir, self.spec.agent_role).data.get("checkpoint")
        if self.rc.train and folder and (Path(folder) / self.role).is_dir():
            return self.load_checkpoint(folder)
        return None

    # --- generation ---

    def generate(
        self, prompts: list[str], temperature: float | None = None, *, n: int, seed: int | None = None
    ) -> list[list[Completion]]:
        """n completions per prompt with the role's sampling config (temperature overridable)."""
        params = self._sampling(temperature, n, seed, self.rc.sampling.top_p)
        with self.busy():
            faults.point("engine.mid_generate")
            return self.engine.generate(prompts, params)

    def choose(
        self,
        requests: list[tuple[str, list[str]]],
        temperature: float | None = None,
        *,
        n: int,
        seed: int | None = None,
    ) -> list[list[Completion]]:
        """Sample completions constrained to each request's candidate set (the repair roles' decoding)."""
        choose = getattr(self.engine, "choose", None)
        if choose is None:
            raise NotImplementedError(
                f"{self.role}: engine {self.rc.engine!r} cannot score candidate sets; "
                "constrained decoding needs the in-process 'hf' engine (set decoding: free "
                "to let a real model write its actions and patches)"
            )
        params = self._sampling(temperature, n, seed, top_p=1.0)  # a candidate set is scored whole
        with self.busy():
            return choose(requests, params)

    def _sampling(self, temperature: float | None, n: int, seed: int | None, top_p: float) -> SamplingParams:
        """The role's sampling config as engine parameters (temperature overridable)."""
        s = self.rc.sampling
        return SamplingParams(
            temperature=s.temperature if temperature is None else temperature,
            top_p=top_p,
            max_new_tokens=s.max_new_tokens,
            n=n,
            seed=seed,
            raw_prompt=not s.chat_template,
        )

    def health(self) -> dict:
        """Engine identity, weight version, process id."""
        from planact.models import param_count

        params = param_count(self.model) if self.model is not None else None
        return {
            **self.engine.health(),
            "role": self.role,
            "pid": os.getpid(),
            "params": params,
            "has_trainer": self.trainer is not None,
        }

    # --- training ---

    def _require_trainer(self) -> RoleTrainer:
        if self.trainer is None:
            raise RuntimeError(f"{self.role} replica {self.replica} has no trainer")
        return self.trainer

    def demonstrations(self, env: RoundEnv, count: int, rng: random.Random) -> list[tuple[list[int], list[int]]]:
        """The teacher's (prompt ids, target ids + EOS) pairs for this role."""
        return self.encode_demonstrations(env.demonstrations(self.role, count, rng))

    def encode_demonstrations(self, pairs: list[tuple[str, str]]) -> list[tuple[list[int], list[int]]]:
        """(prompt, target) text pairs as (prompt ids, target ids + EOS), the first prompt kept as input example."""
        if pairs:
            self._input_example = pairs[0][0]
        eos = self.tokenizer.eos_token_id
        raw = not self.rc.sampling.chat_template
        return [
            (self.engine.encode(p, raw), self.tokenizer.encode(t, add_special_tokens=False) + [eos]) for p, t in pairs
        ]

    def warm_start(
        self, demos: list[tuple[str, str]], seed: int, steps: int | None = None, progress_file: str | None = None
    ) -> list[dict]:
        """Supervised warm start on the teacher's (prompt, target) demonstrations; returns the loss curve.

        `demos`: drawn from the environment on the driver (planact.role_spec.warm_start_demos); `progress_file`:
        where the steps report k of n, for the task waiting on this call to show (agents.warm_start_and_sync)."""
        import torch

        from planact.progress import FileProgress
        from planact.rl.sft import sft

        trainer = self._require_trainer()
        report = FileProgress(progress_file) if progress_file else None
        encoded = self.encode_demonstrations(demos)
        torch.manual_seed(seed)
        curve = sft(
            self.model,
            self.tokenizer.pad_token_id,
            encoded,
            self.rc.warm_start,
            seed=seed,
            steps=steps,
            progress=report,
            what=f"warm start ({self.role})",
        )
        trainer.snapshot_reference()
        if self.leader:
            self.leader.state_changed()
        self._publish(self.engine.weight_version + 1)
        return curve

    def train(self, samples: list[Sample], step_id: str | None = None) -> dict:
        """One GRPO update on this role's samples, then sync the colocated engine (once per step_id)."""
        done = getattr(self, "_last_step", (None, None))
        if step_id is not None and done[0] == step_id:
            return dict(done[1])  # a retried task: this step was applied already
        trainer = self._require_trainer()
        # How many versions behind these weights each sample was drawn (pipelined rounds: 1; else 0).
        version = self.engine.weight_version
        samples = [{**s, "staleness": max(0, version - s.get("weight_version", version))} for s in samples]
        metrics = self.leader.train_step(samples) if self.leader else trainer.train_step(samples)
        faults.point("trainer.mid_train")  # trained, not yet published or acknowledged
        if samples:  # a real prompt of this role, saved with checkpoints as the registry's input example
            self._input_example = self.tokenizer.decode(samples[0]["prompt_ids"], skip_special_tokens=True)
        metrics["weight_version"] = float(self._publish(self.engine.weight_version + 1))
        self._last_step = (step_id, dict(metrics))
        return metrics

    def _publish(self, version: int) -> int:
        """Make the trained model's weights the engine's: in-process for hf, through a shared folder for sglang."""
        faults.point("trainer.mid_sync")
        if self.rc.engine == "sglang":
            return self.engine.update_weights_from_disk(self._export(version), version)
        return self.engine.update_weights(None, version)

    def _export(self, version: int) -> str:
        # SGLang replicas may run on other nodes: weights_dir must be storage they all see.
        root = Path(self.rc.sglang.weights_dir) if self.rc.sglang.weights_dir else self.spec.run_dir / "weights"
        out = root / self.role / f"v{version:06d}"
        self.model.save_pretrained(out)
        self.tokenizer.save_pretrained(out)
        self._exported = (str(out), version)
        return str(out)

    def get_weights(self) -> tuple[dict | str, int]:
        """What other replicas need to catch up: a CPU state_dict (hf; the adapters alone with LoRA) or the
        exported folder (sglang)."""
        if self.rc.engine == "sglang":
            return getattr(self, "_exported", None) or (
                self._export(self.engine.weight_version),
                self.engine.weight_version,
            )
        if self.rc.lora.enabled:
            return lora.adapter_state(self.model), self.engine.weight_version
        return {k: v.detach().cpu() for k, v in self.model.state_dict().items()}, self.engine.weight_version

    def update_weights(self, weights: dict | str | None, version: int) -> int:
        """Install weights from the trainer (a state_dict, or a checkpoint folder for sglang)."""
        if isinstance(weights, str):
            return self.engine.update_weights_from_disk(weights, version)
        if self.rc.lora.enabled and weights is not None:
            lora.load_adapter_state(self.model, weights)
            weights = None  # installed in the shared model; the engine only bumps its version
        return self.engine.update_weights(weights, version)

    def on_stop(self) -> None:
        """Stop what the engine launched (an sglang server) with the agent."""
        close = getattr(self.engine, "close", None)
        if close is not None:
            close()

    # --- checkpoints ---

    def save_checkpoint(self, folder: str, expect_version: int | None = None) -> str:
        """Weights (save_pretrained), optimizer, RNG and weight version into folder/<role>.

        `expect_version` is the version the run's last round left: a trainer recreated since (it restored
        the last checkpoint) holds less, and saving it would silently drop updates the run counts."""
        import torch

        if expect_version is not None and self.engine.weight_version != expect_version:
            raise RuntimeError(
                f"{self.role}: the trainer holds weight version {self.engine.weight_version}, the run "
                f"reached {expect_version}: it was recreated and lost updates since the last checkpoint; "
                "resume the run to re-run the rounds after it"
            )
        out = Path(folder) / self.role
        out.mkdir(parents=True, exist_ok=True)
        if self.rc.lora.enabled:  # the adapter and the base it adapts, named as configured
            lora.save_adapter(self.model, out, self.rc.model_path or str(self.spec.initial_model()))
        else:
            self.model.save_pretrained(out)
        faults.point("trainer.mid_checkpoint")  # weights written, optimizer state and meta not yet
        self.tokenizer.save_pretrained(out)
        state = {
            "weight_version": self.engine.weight_version,
            "torch_rng": torch.get_rng_state(),
            "trainer": self.trainer.state_dict() if self.trainer else None,
        }
        torch.save(state, out / "trainer_state.pt")
        (out / "meta.json").write_text(json.dumps({"role": self.role, "weight_version": self.engine.weight_version}))
        if getattr(self, "_input_example", None):
            (out / "input_example.txt").write_text(self._input_example)
        fsync_tree(out)  # durable before the run state names this checkpoint as the resume point
        return str(out)

    def load_checkpoint(self, folder: str) -> int:
        """Restore what save_checkpoint wrote; returns the weight version."""
        import torch

        from planact.models import load_model

        src = Path(folder) / self.role
        if lora.is_adapter_folder(src):
            lora.load_adapter_state(self.model, lora.read_adapter(src))
        else:
            model, _ = load_model(src, self.rc.resources.device, self.rc.attention_kernel)
            self.model.load_state_dict(model.state_dict())
        state = torch.load(src / "trainer_state.pt", weights_only=False)
        torch.set_rng_state(state["torch_rng"])
        if self.trainer is not None and state["trainer"] is not None:
            self.trainer.load_state_dict(state["trainer"])
        if self.leader:
            self.leader.state_changed()
        return self._publish(state["weight_version"])
