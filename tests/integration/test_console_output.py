"""What a person sees in the console for a long run: the progress display and the summary, not a line per
round and not the libraries' routine notes."""

from __future__ import annotations

import re

import pytest

from .conftest import cli_env, run_cli, smoke_args


@pytest.mark.slow
def test_a_60_round_run_prints_under_100_lines(prefect_api, tmp_path):
    rc, out = run_cli(
        smoke_args(
            tmp_path,
            "rounds=60",
            "tracking.eval_every=10",
            "checkpoint.every=10",
            "env.tasks_per_round=4",
            "tracking.register_models=true",  # as users run it: the registration's library notes stay quiet too
        ),
        tmp_path / "cli.log",
        env=cli_env(),
    )
    assert rc == 0, out[-3000:]
    lines = out.splitlines()
    assert len(lines) < 100, "\n".join(lines)
    rounds = [int(m) for m in re.findall(r"\] round (\d+)/60: success", out)]
    # Every few rounds and every evaluated round, first and last included; never one line per round.
    assert rounds[0] == 1 and rounds[-1] == 60 and {10, 20, 30, 40, 50} <= set(rounds) and len(rounds) <= 26, rounds
    assert "finished in" in out and "│ pass@1" in out  # the end-of-run table
    for noise in (
        "Finished in state",
        "FutureWarning",
        "model card could not be retrieved",
        "license information",
        "infer the model output signature",
    ):
        assert noise not in out, noise
