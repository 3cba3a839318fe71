"""A flow's command line: --config/--set/--param parsed and the config validated before anything starts, then
the flow run and its summary table (what every `python -m flows.<name>` and `planact <command>` prints)."""

from __future__ import annotations

import argparse
import inspect
import os
import sys
import time
from collections.abc import Callable
from typing import Any

from prefect import Flow

from flows.runtime import ensure_prefect_api
from planact.config import ConfigError, load_config
from planact.preflight import check_runtime
from tasks import QUIET_ENV, quiet_state_lines


def cli(
    argv: list[str] | None,
    flow_fn: Flow,
    load: Callable[[str | None, list[str]], Any] | None = None,
    check: Callable[[Any], None] | None = None,
    default_config: str = "configs/demo.yaml",
    summary: Callable[[str, dict, float], None] | None = None,
) -> int:
    """Parse --config/--set, validate before anything starts, run the flow, print the summary table."""
    parser = argparse.ArgumentParser(description=flow_fn.__doc__)
    parser.add_argument("--config", default=default_config, help="YAML run config")
    parser.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a config field, e.g. --set rounds=4 --set planner.rl.lr=1e-4",
    )
    parser.add_argument(
        "--param",
        dest="params",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="another parameter of the flow, e.g. --param actor_model=models:/demo-actor/1",
    )
    parser.add_argument(
        "--prefect-state-lines",
        action="store_true",
        help="print Prefect's per-run state lines ('Finished in state Completed()', 'Created task "
        "run ...') on the console too (they always reach the Prefect UI)",
    )
    args = parser.parse_args(argv)
    known = set(inspect.signature(flow_fn.fn).parameters) - {"config"}
    params = dict(p.split("=", 1) for p in args.params if "=" in p)
    bad = [p for p in args.params if "=" not in p] + sorted(set(params) - known)
    if bad:
        print(
            f"error: --param {', '.join(bad)}: not NAME=VALUE of this flow (it takes: {', '.join(sorted(known))})",
            file=sys.stderr,
        )
        return 2
    try:
        cfg = (load or load_config)(args.config, args.overrides)
        (check or check_runtime)(cfg)
    except (ConfigError, NotImplementedError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    ensure_prefect_api()
    if not args.prefect_state_lines:
        os.environ[QUIET_ENV] = "1"  # Ray workers running tasks read it when tasks/ is imported there
        quiet_state_lines()
    t0 = time.perf_counter()
    result = flow_fn(cfg, **params)
    (summary or print_summary)(cfg.run_name, result, time.perf_counter() - t0)
    return 0


def print_summary(run_name: str, summary: dict, seconds: float) -> None:
    """A final table: warm start vs final held-out metrics."""
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"planact run '{run_name}' finished in {seconds:.0f} s")
    table.add_column("held-out metric")
    table.add_column("warm start", justify="right")
    table.add_column("after RL", justify="right")
    table.add_column("change (points)", justify="right")
    for key in [k.removeprefix("final/") for k in summary if k.startswith("final/")]:  # the env's headline order
        if f"warm_start/{key}" in summary:
            a, b = summary[f"warm_start/{key}"], summary[f"final/{key}"]
            table.add_row(key, f"{a:.3f}", f"{b:.3f}", f"{100 * (b - a):+.1f}")
    Console().print(table)
    for split, words in (
        ("unseen_packages", "unseen packages"),
        ("unseen_functions", "unseen functions"),
        ("unseen_2025", "packages first released in 2025+"),
        ("real", "real fixes from release history"),
    ):
        if f"final/{split}/team/solve_at_1" in summary:
            print(
                f"held-out solve rate ({words}, budget 1): warm start "
                f"{summary[f'warm_start/{split}/team/solve_at_1']:.3f}"
                f" -> RL {summary[f'final/{split}/team/solve_at_1']:.3f}"
            )
    for k in ("prefect_flow_run", "mlflow_run_id", "mlflow_url", "run_dir"):
        if k in summary:
            print(f"{k}: {summary[k]}")
    for role, uri in (summary.get("registered") or {}).items():
        print(f"registered {role}: {uri}  (mlflow.transformers.load_model({uri!r}))")
