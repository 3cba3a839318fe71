"""Writes the notebooks from their cells here (source of truth; `python notebooks/build.py` after edits).

Each notebook starts with a cell tagged `parameters` so papermill (and the tests) can shrink it.
"""

from __future__ import annotations

from pathlib import Path

import nbformat as nbf

HERE = Path(__file__).resolve().parent


def notebook(cells: list[tuple[str, str]], params: str) -> nbf.NotebookNode:
    """A notebook: a tagged parameters cell, then (kind, source) cells."""
    nb = nbf.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    p = nbf.v4.new_code_cell(params)
    p.metadata["tags"] = ["parameters"]
    nb.cells = [nbf.v4.new_markdown_cell(cells[0][1]), p]
    nb.cells += [nbf.v4.new_code_cell(src) if kind == "code" else nbf.v4.new_markdown_cell(src) for kind, src in cells[1:]]
    return nb


QUICKSTART = notebook([
    ("md", "# planact quickstart\n\nA short Plan/Act training run (the same flow the CLI and the deployments run), "
           "then the reward and success curves of each role, read back from MLflow."),
    ("code", "import sys\nfrom pathlib import Path\n\n"
             "ROOT = Path.cwd() if (Path.cwd() / 'configs').is_dir() else Path.cwd().parent\n"
             "sys.path.insert(0, str(ROOT))\n"
             "from flows.plan_act import plan_act_training\n"
             "from flows.runtime import ensure_prefect_api\n"
             "from planact.config import load_config\n\n"
             "cfg = load_config(ROOT / config, [f'rounds={rounds}', f'run_name={run_name}',\n"
             "                                  f'checkpoint.root={checkpoint_root}', *overrides])\n"
             "ensure_prefect_api()  # $PREFECT_API_URL, or a temporary local server\n"
             "cfg.rounds, cfg.env.tasks_per_round"),
    ("md", "Train. Re-running this cell with the same `run_name` resumes the run instead of starting over."),
    ("code", "summary = plan_act_training(cfg)\n{k: round(v, 3) for k, v in summary.items() if isinstance(v, float)}"),
    ("md", "## Curves per role from MLflow (metrics are logged with `step = round`)"),
    ("code", "import matplotlib\nmatplotlib.use('Agg')\nimport matplotlib.pyplot as plt\nfrom mlflow import MlflowClient\n\n"
             "from planact.tracking import tracking_uri\n\n"
             "client = MlflowClient(tracking_uri(cfg))\n"
             "curves = {key: [(m.step, m.value) for m in client.get_metric_history(summary['mlflow_run_id'], key)]\n"
             "          for key in ('planner/reward_mean', 'actor/reward_mean', 'success')}\n"
             "fig, ax = plt.subplots(figsize=(6, 3.5))\n"
             "for key, points in curves.items():\n"
             "    ax.plot([s for s, _ in points], [v for _, v in points], marker='o', label=key)\n"
             "ax.set_xlabel('round'); ax.set_ylabel('mean'); ax.legend(); ax.set_title(cfg.run_name)\n"
             "fig.savefig(Path(checkpoint_root) / f'{run_name}-curves.png', dpi=80)\n"
             "assert all(len(p) == cfg.rounds for p in curves.values()), curves\n"
             "{k: len(v) for k, v in curves.items()}"),
], params="config = 'configs/demo.yaml'   # the embedded defaults\nrounds = 10\nrun_name = 'notebook-quickstart'\n"
          "checkpoint_root = 'runs'\noverrides: list[str] = []")

COMPARE = notebook([
    ("md", "# Compare runs\n\nEvery planact run is one MLflow run with the flattened config as params and "
           "per-round metrics. Query them, line up configs and results in one table, plot the curves."),
    ("code", "import matplotlib\nmatplotlib.use('Agg')\nimport matplotlib.pyplot as plt\nimport mlflow\n"
             "from mlflow import MlflowClient\n\n"
             "mlflow.set_tracking_uri(tracking_uri)\n"
             "client = MlflowClient(tracking_uri)\n"
             "exp = client.get_experiment_by_name(experiment)\n"
             "runs = mlflow.search_runs([exp.experiment_id], max_results=max_runs) if exp else None\n"
             "assert runs is not None and len(runs), f'no runs in experiment {experiment!r} at {tracking_uri}'\n"
             "len(runs)"),
    ("md", "## Configs and results side by side (only the params that differ between runs)"),
    ("code", "params = [c for c in runs.columns if c.startswith('params.')]\n"
             "varying = [c for c in params if runs[c].nunique(dropna=False) > 1]\n"
             "metrics = [c for c in ('metrics.success', 'metrics.heldout/pass@1', 'metrics.heldout/greedy/success')\n"
             "           if c in runs.columns]\n"
             "table = runs[['tags.mlflow.runName', 'status', *varying, *metrics]]\n"
             "table"),
    ("code", "fig, ax = plt.subplots(figsize=(6, 3.5))\n"
             "for _, row in runs.iterrows():\n"
             "    hist = client.get_metric_history(row['run_id'], metric)\n"
             "    if hist:\n"
             "        ax.plot([m.step for m in hist], [m.value for m in hist], label=row['tags.mlflow.runName'])\n"
             "ax.set_xlabel('round'); ax.set_ylabel(metric); ax.legend(fontsize=7)\n"
             "fig.savefig(figure_path, dpi=80)\n"
             "table.shape"),
], params="tracking_uri = 'sqlite:///runs/mlflow.db'\nexperiment = 'planact'\nmetric = 'success'\nmax_runs = 50\n"
          "figure_path = 'runs/compare.png'")

AFLOW = notebook([
    ("md", "# AFlow search\n\nA short workflow search with the `aflow-optimize` flow (offline: the synthetic Plan/Act "
           "benchmark executed by the local planner+actor, structured edits, GiGPO-guided), then the search tree, "
           "the per-round scores and the best workflow's code."),
    ("code", "import sys\nfrom pathlib import Path\n\n"
             "ROOT = Path.cwd() if (Path.cwd() / 'configs').is_dir() else Path.cwd().parent\n"
             "sys.path.insert(0, str(ROOT))\n"
             "from aflow_rl.config import load_aflow_config\n"
             "from flows.aflow import aflow_optimize\n"
             "from flows.runtime import ensure_prefect_api\n\n"
             "sets = [f'search.max_rounds={rounds}', f'run_name={run_name}', f'root={root}', *overrides]\n"
             "if executor_checkpoint:\n"
             "    sets.append(f'executor.checkpoint={executor_checkpoint}')\n"
             "cfg = load_aflow_config(ROOT / config, sets)\n"
             "ensure_prefect_api()  # $PREFECT_API_URL, or a temporary local server\n"
             "cfg.search.max_rounds, cfg.policy.enabled"),
    ("md", "Search. Re-running this cell with the same `run_name` continues the search from its workspace."),
    ("code", "summary = aflow_optimize(cfg)\n"
             "{k: summary[k] for k in ('round_1', 'best_round', 'best_validation', 'test_score')}"),
    ("md", "## The search tree (round / validation score; the best workflow outlined)"),
    ("code", "from IPython.display import Image, display\n\n"
             "display(Image(filename=summary['tree_png']))\n"
             "Path(summary['tree_png']).stat().st_size"),
    ("md", "## Scores per round, and what each round changed"),
    ("code", "from aflow_rl.workspace import Workspace\n\n"
             "ws = Workspace(summary['workspace'])\n"
             "rows = [(r, round(s, 3), ws.meta(r).get('parent'), ws.meta(r).get('modification', '')) for r, s in ws.scores().items()]\n"
             "for row in rows:\n    print(*row, sep='  ')\n"
             "assert len(rows) >= 2"),
    ("md", "## The best workflow (graph.py and prompt.py, in AFlow's format)"),
    ("code", "best = Path(summary['best_workflow'])\n"
             "print((best / 'graph.py').read_text())\nprint((best / 'prompt.py').read_text())"),
], params="config = 'configs/aflow-demo.yaml'   # the embedded defaults\nrounds = 10\nrun_name = 'notebook-aflow'\n"
          "root = 'runs'\nexecutor_checkpoint = ''   # a Plan/Act checkpoint folder; empty = warm-start tiny models once\n"
          "overrides: list[str] = []")

if __name__ == "__main__":
    for name, nb in (("01_quickstart", QUICKSTART), ("02_aflow_search", AFLOW), ("03_compare_runs", COMPARE)):
        nbf.write(nb, HERE / f"{name}.ipynb")
        print("wrote", name)
