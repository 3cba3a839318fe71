"""The trainers' AdamW skips torch's compiler wrappers and nothing else: the same weights and optimizer state
step for step as torch.optim.AdamW, and a training process that never loads the compiler (~1.5 CPU-s in every
role agent and trainer rank)."""

from __future__ import annotations

import subprocess
import sys

import torch

from planact.rl.eager_optim import EagerAdamW


def _train(opt_cls, steps: int = 5):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 3))
    opt = opt_cls(model.parameters(), lr=1e-2, weight_decay=0.1)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / 3))
    data = torch.randn(steps, 4, 8)
    for x in data:
        loss = model(x).pow(2).mean()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 0.5)
        opt.step()
        sched.step()
        opt.zero_grad()
    return model.state_dict(), opt.state_dict()


def test_the_same_weights_and_optimizer_state_as_torchs_adamw():
    (w_ref, s_ref), (w, s) = _train(torch.optim.AdamW), _train(EagerAdamW)
    assert all(torch.equal(w_ref[k], w[k]) for k in w_ref)
    assert s_ref["param_groups"] == s["param_groups"]
    for i, st in s_ref["state"].items():
        assert all(torch.equal(st[k], s["state"][i][k]) for k in st)
    # A checkpoint of either loads into the other.
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 3))
    torch.optim.AdamW(model.parameters(), lr=1e-2).load_state_dict(s)
    EagerAdamW(model.parameters(), lr=1e-2).load_state_dict(s_ref)


def test_a_training_step_does_not_load_torchs_compiler():
    code = (
        "import sys, torch\n"
        "from planact.rl.eager_optim import adamw\n"
        "m = torch.nn.Linear(4, 4)\n"
        "opt = adamw(m.parameters(), lr=1e-3)\n"
        "m(torch.randn(2, 4)).sum().backward(); opt.step(); opt.zero_grad()\n"
        "opt.load_state_dict(opt.state_dict())\n"
        "print('torch._dynamo' in sys.modules, type(adamw(m.parameters(), compiled=True)).__name__)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["False", "AdamW"]  # a compiled trainer keeps torch's own optimizer
