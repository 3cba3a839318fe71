"""LoRA adapters on a role's model (peft): wrap, ship, save and load only the adapter weights.

A role with `lora.enabled` trains low-rank adapters on its attention/MLP projections while the base
weights stay frozen. What that buys on a pretrained model: the optimizer holds state for ~1% of the
parameters, weight sync ships a few MB instead of the whole model, and the KL reference is the same
model with its adapters switched off (no second copy in memory). A checkpoint holds the adapter and
names its base (`planact_base.json`): the model_path the role was configured with, resolved again on
load, so a checkpoint moves between machines that can each resolve that base.
"""

from __future__ import annotations

import contextlib
import json
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # torch is imported where used: Ray helper processes import this module without it
    import torch

BASE_FILE = "planact_base.json"
ADAPTER_CONFIG = "adapter_config.json"


def apply_lora(model: torch.nn.Module, cfg, seed: int) -> torch.nn.Module:
    """`model` wrapped with fresh LoRA adapters per `cfg` (a LoRAConfig); base weights frozen.

    LoRA's B matrices start at zero, so the wrapped model computes exactly what the base does; the A
    matrices are drawn from `seed` so every replica of a role starts from the same adapter."""
    import torch
    from peft import LoraConfig, get_peft_model

    from planact.llama import as_transformers

    model = as_transformers(model)  # peft wraps transformers' classes, not planact's own Llama
    torch.manual_seed(seed)
    peft_cfg = LoraConfig(
        r=cfg.rank,
        lora_alpha=cfg.alpha,
        lora_dropout=cfg.dropout,
        target_modules=list(cfg.target_modules),
        task_type="CAUSAL_LM",
        bias="none",
    )
    return get_peft_model(model, peft_cfg)


def is_lora(model: torch.nn.Module) -> bool:
    """True when `model` carries peft adapters."""
    return hasattr(model, "disable_adapter") and hasattr(model, "peft_config")


def trainable(model: torch.nn.Module) -> list[torch.nn.Parameter]:
    """The parameters an optimizer should hold: all of a plain model, only the adapters of a LoRA one."""
    return [p for p in model.parameters() if p.requires_grad]


def base_model(model: torch.nn.Module) -> torch.nn.Module:
    """The transformers model under the adapters (the model itself when it has none)."""
    return model.get_base_model() if is_lora(model) else model


@contextlib.contextmanager
def adapters_off(model: torch.nn.Module):
    """The base model's behaviour for the block (the KL reference), adapters back on after."""
    with model.disable_adapter():
        yield


def adapter_state(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    """The adapter weights alone, on the CPU: what weight sync ships to other replicas."""
    from peft import get_peft_model_state_dict

    return {k: v.detach().cpu() for k, v in get_peft_model_state_dict(model).items()}


def load_adapter_state(model: torch.nn.Module, state: dict[str, torch.Tensor]) -> None:
    """Install adapter weights from adapter_state() (or a saved adapter file); every key must land."""
    from peft import set_peft_model_state_dict

    result = set_peft_model_state_dict(model, state)
    unexpected = getattr(result, "unexpected_keys", []) or []
    if unexpected:
        raise ValueError(f"adapter weights do not fit this model: {sorted(unexpected)[:3]} ...")


def save_adapter(model: torch.nn.Module, out: str | Path, base_spec: str) -> None:
    """Adapter weights + config (peft's save_pretrained) and the base they adapt, named as configured."""
    out = Path(out)
    model.save_pretrained(out)
    (out / BASE_FILE).write_text(json.dumps({"model_path": base_spec}))


def is_adapter_folder(path: str | Path) -> bool:
    """True for a folder save_adapter() (or peft) wrote: adapter weights, no full model."""
    return (Path(path) / ADAPTER_CONFIG).is_file()


def base_of(folder: str | Path) -> str:
    """The base model an adapter folder adapts: planact's own record first, else peft's."""
    folder = Path(folder)
    if (folder / BASE_FILE).is_file():
        return json.loads((folder / BASE_FILE).read_text())["model_path"]
    return json.loads((folder / ADAPTER_CONFIG).read_text())["base_model_name_or_path"]


def read_adapter(folder: str | Path) -> dict[str, torch.Tensor]:
    """The adapter weights saved in `folder`."""
    from safetensors.torch import load_file

    return load_file(str(Path(folder) / "adapter_model.safetensors"))


def resolve_base(spec: str) -> Path:
    """The local folder of an adapter's base: `planact:<name>` imported on first use, else a folder."""
    if spec.startswith("planact:"):
        from planact.model_import import resolve_alias

        return resolve_alias(spec)
    return Path(spec)
