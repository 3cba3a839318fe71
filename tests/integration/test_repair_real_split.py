"""The repair team's evaluation on the `real` split: the fixes of a release-history corpus, judged beside the
mutation splits by the same systems, with the share the localisation and candidates can reach (no network)."""

from __future__ import annotations

from types import SimpleNamespace

from graph_planner.cli import main as repair_cli
from graph_planner.corpus.build import build_corpus
from graph_planner.corpus.spec import CorpusConfig, PackageSpec
from graph_planner.env_config import TOKEN_KINDS
from graph_planner.team.env import RepairTeamEnv
from planact.config import load_config

from .conftest import REPO
from .history_fixture import history_config
from .repair_fixture import write_package


class _First:
    """Always the first option; the patch model ranks the candidates in the order offered."""

    def choose(self, requests, temperature=None, n=1, seed=0):
        return [[SimpleNamespace(meta={"choice": 0, "ranking": list(range(len(opts)))})] * n for _, opts in requests]


def test_evaluation_reports_the_real_split_beside_the_mutation_splits(tmp_path):
    # a training corpus of minilib mutations, and the real fixes between two local releases of it
    spec = PackageSpec(name="minilib", version="0.1", source=str(write_package(tmp_path)), split="train")
    cfg = CorpusConfig(packages=[spec], kinds=list(TOKEN_KINDS), per_function=1, max_tried=8, max_kept=8, timeout_s=30)
    build_corpus(cfg, tmp_path / "corpus", log=lambda _: None)
    history = history_config(tmp_path / "history")
    real = tmp_path / "corpus-real"
    assert (
        repair_cli(["corpus", "--history", "minilib", "0.1", "0.2", "--config", str(history), "--out", str(real)]) == 0
    )

    def env(real_corpus: str) -> RepairTeamEnv:
        overrides = [
            f"env.repair.corpus={tmp_path / 'corpus'}",
            "env.repair.unseen_function_frac=0.5",
            f"checkpoint.root={tmp_path / 'runs'}",
        ] + ([f"env.repair.eval_real_corpus={real_corpus}"] if real_corpus else [])
        return RepairTeamEnv(load_config(REPO / "configs" / "repair-smoke.yaml", overrides))

    metrics = env(str(real)).evaluate(_First(), _First())
    # both real fixes count (mean's, and the one spanning _size and window), for every system, at budgets 1 and 2
    assert metrics["real/tasks"] == 2.0
    for system in ("team", "rule", "random"):
        assert 0.0 <= metrics[f"real/{system}/solve_at_1"] <= metrics[f"real/{system}/solve_at_2"] <= 1.0
    # the mutation split is still there, and its gold fixes are token-level candidates by construction
    assert metrics.get("unseen_functions/tasks", 0) >= 1, metrics
    assert metrics["unseen_functions/reach/gold_candidate"] == 1.0
    # mean's fix adds an `if`: no token-level candidate holds it, and the two-function fix no single edit does
    assert metrics["real/reach/gold_candidate"] == metrics["real/reach/reachable"] == 0.0
    assert metrics["real/rule/solve_at_2"] == 0.0
    assert metrics["real/reach/offered"] == 1.0  # the localisation offers a function each fix changes
    # off by default: no real split, no real metrics
    assert not any(k.startswith("real/") for k in env("").evaluate(_First(), _First()))
