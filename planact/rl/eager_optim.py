"""AdamW that never imports torch's compiler: the optimizer of every trainer that compiles nothing.

torch marks its optimizers' methods "never compile me" with wrappers that import `torch._dynamo` on first
use (1.3-1.5 CPU-s in each process, more than the rest of a role agent's training imports): `step` imports
it on every call to place two graph breaks, `zero_grad`, `add_param_group`, `state_dict` and
`load_state_dict` to build a compiler mark. In a process that compiles nothing those are no-ops, so this
AdamW runs the same update (torch's own `step` body, with gradients off as its wrapper sets them) and
caches the mark as "call the function itself". The arithmetic is torch's; only the wrappers are skipped.
"""

from __future__ import annotations

import sys

import torch

# torch's lazy wrapper caches the compiler's mark on the wrapped function under this name; set to the
# function itself, the wrapper calls it directly and never imports the compiler.
_MARK = "__dynamo_disable"


def _skip_compiler_marks() -> None:
    for cls in (torch.optim.Optimizer, torch.optim.lr_scheduler.LRScheduler):
        for value in vars(cls).values():
            fn, code = getattr(value, "__wrapped__", None), getattr(value, "__code__", None)
            # Only torch's own lazy wrapper: its code reads the mark by name.
            if callable(fn) and code is not None and _MARK in code.co_names + code.co_consts:
                if getattr(fn, _MARK, None) is None:
                    setattr(fn, _MARK, fn)


class EagerAdamW(torch.optim.AdamW):
    """torch.optim.AdamW without the compiler's wrappers (same state, same checkpoints, same numbers)."""

    def __init__(self, params, **kwargs):
        if "torch._dynamo" not in sys.modules:  # once the compiler is loaded, its own marks are the right ones
            _skip_compiler_marks()
        super().__init__(params, **kwargs)

    @torch.no_grad()  # what torch's step wrapper sets for a non-differentiable optimizer
    def step(self, closure=None):
        """One AdamW update: torch's own step body."""
        return torch.optim.AdamW.step.__wrapped__(self, closure)


def adamw(params, compiled: bool = False, **kwargs) -> torch.optim.AdamW:
    """AdamW for a trainer: torch's own when the trainer compiles its forward, EagerAdamW otherwise."""
    return (torch.optim.AdamW if compiled else EagerAdamW)(params, **kwargs)
