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
    nb.cells += [
        nbf.v4.new_code_cell(src) if kind == "code" else nbf.v4.new_markdown_cell(src) for kind, src in cells[1:]
    ]
    return nb


QUICKSTART = notebook(
    [
        (
            "md",
            "# planact quickstart\n\nA short Plan/Act training run (the same flow the CLI and the deployments run), "
            "then the reward and success curves of each role, read back from MLflow.",
        ),
        (
            "code",
            "import sys\nfrom pathlib import Path\n\n"
            "ROOT = Path.cwd() if (Path.cwd() / 'configs').is_dir() else Path.cwd().parent\n"
            "sys.path.insert(0, str(ROOT))\n"
            "from flows.plan_act import plan_act_training\n"
            "from flows.runtime import ensure_prefect_api\n"
            "from planact.config import load_config\n\n"
            "cfg = load_config(ROOT / config, [f'rounds={rounds}', f'run_name={run_name}',\n"
            "                                  f'checkpoint.root={checkpoint_root}', *overrides])\n"
            "ensure_prefect_api()  # $PREFECT_API_URL, or a temporary local server\n"
            "cfg.rounds, cfg.env.tasks_per_round",
        ),
        ("md", "Train. Re-running this cell with the same `run_name` resumes the run instead of starting over."),
        (
            "code",
            "summary = plan_act_training(cfg)\n{k: round(v, 3) for k, v in summary.items() if isinstance(v, float)}",
        ),
        ("md", "## Curves per role from MLflow (metrics are logged with `step = round`)"),
        (
            "code",
            "import matplotlib\nmatplotlib.use('Agg')\nimport matplotlib.pyplot as plt\nfrom mlflow import "
            "MlflowClient\n\n"
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
            "{k: len(v) for k, v in curves.items()}",
        ),
        (
            "md",
            "## The trained actor from the MLflow Model Registry\n\nThe run registered each trained role as a new "
            "version of `<run_name>-planner` / `<run_name>-actor` (transformers flavour, tagged with the run, round "
            "and held-out figures). Any MLflow user loads it by URI, here as a transformers text-generation pipeline, "
            "and prompts it with a real actor prompt saved with the checkpoint.",
        ),
        (
            "code",
            "import mlflow\nimport mlflow.transformers\n\n"
            "mlflow.set_tracking_uri(tracking_uri(cfg))\n"
            "actor_uri = summary['registered']['actor']\n"
            "version = client.get_model_version(*actor_uri[len('models:/'):].split('/'))\n"
            "print(actor_uri, {k: v for k, v in version.tags.items() if k.startswith('heldout/')})\n\n"
            "pipe = mlflow.transformers.load_model(actor_uri)\n"
            "prompt = (Path(summary['run_dir']) / 'checkpoints' / f\"round_{version.tags['planact.round'].zfill(5)}\"\n"
            "          / 'actor' / 'input_example.txt').read_text()\n"
            "out = pipe(prompt, max_new_tokens=8, min_new_tokens=1, do_sample=False, return_tensors=True)[0]\n"
            "new_ids = out['generated_token_ids'][len(pipe.tokenizer(prompt)['input_ids']):]\n"
            "print(repr(prompt), '->', repr(pipe.tokenizer.decode(new_ids)))\n"
            "assert new_ids, 'the registered actor generated nothing'",
        ),
    ],
    params="config = 'configs/demo.yaml'   # the embedded defaults\nrounds = 10\nrun_name = 'notebook-quickstart'\n"
    "checkpoint_root = 'runs'\noverrides: list[str] = []",
)

COMPARE = notebook(
    [
        (
            "md",
            "# Compare runs\n\nEvery planact run is one MLflow run with the flattened config as params and "
            "per-round metrics. Query them, line up configs and results in one table, plot the curves.",
        ),
        (
            "code",
            "import matplotlib\nmatplotlib.use('Agg')\nimport matplotlib.pyplot as plt\nimport mlflow\n"
            "from mlflow import MlflowClient\n\n"
            "mlflow.set_tracking_uri(tracking_uri)\n"
            "client = MlflowClient(tracking_uri)\n"
            "exp = client.get_experiment_by_name(experiment)\n"
            "runs = mlflow.search_runs([exp.experiment_id], max_results=max_runs) if exp else None\n"
            "assert runs is not None and len(runs), f'no runs in experiment {experiment!r} at {tracking_uri}'\n"
            "len(runs)",
        ),
        ("md", "## Configs and results side by side (only the params that differ between runs)"),
        (
            "code",
            "params = [c for c in runs.columns if c.startswith('params.')]\n"
            "varying = [c for c in params if runs[c].nunique(dropna=False) > 1]\n"
            "metrics = [c for c in ('metrics.success', 'metrics.heldout/pass@1', 'metrics.heldout/greedy/success')\n"
            "           if c in runs.columns]\n"
            "table = runs[['tags.mlflow.runName', 'status', *varying, *metrics]]\n"
            "table",
        ),
        (
            "code",
            "fig, ax = plt.subplots(figsize=(6, 3.5))\n"
            "for _, row in runs.iterrows():\n"
            "    hist = client.get_metric_history(row['run_id'], metric)\n"
            "    if hist:\n"
            "        ax.plot([m.step for m in hist], [m.value for m in hist], label=row['tags.mlflow.runName'])\n"
            "ax.set_xlabel('round'); ax.set_ylabel(metric); ax.legend(fontsize=7)\n"
            "fig.savefig(figure_path, dpi=80)\n"
            "table.shape",
        ),
    ],
    params="tracking_uri = 'sqlite:///runs/mlflow.db'\nexperiment = 'planact'\nmetric = 'success'\nmax_runs = 50\n"
    "figure_path = 'runs/compare.png'",
)

AFLOW = notebook(
    [
        (
            "md",
            "# AFlow search\n\nA short workflow search with the `aflow-optimize` flow (offline: the synthetic Plan/Act "
            "benchmark executed by the local planner+actor, structured edits, GiGPO-guided), then the search tree, "
            "the per-round scores and the best workflow's code.",
        ),
        (
            "code",
            "import sys\nfrom pathlib import Path\n\n"
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
            "cfg.search.max_rounds, cfg.policy.enabled",
        ),
        ("md", "Search. Re-running this cell with the same `run_name` continues the search from its workspace."),
        (
            "code",
            "summary = aflow_optimize(cfg)\n"
            "{k: summary[k] for k in ('round_1', 'best_round', 'best_validation', 'test_score')}",
        ),
        ("md", "## The search tree (round / validation score; the best workflow outlined)"),
        (
            "code",
            "from IPython.display import Image, display\n\n"
            "display(Image(filename=summary['tree_png']))\n"
            "Path(summary['tree_png']).stat().st_size",
        ),
        ("md", "## Scores per round, and what each round changed"),
        (
            "code",
            "from aflow_rl.workspace import Workspace\n\n"
            "ws = Workspace(summary['workspace'])\n"
            "rows = [(r, round(s, 3), ws.meta(r).get('parent'), ws.meta(r).get('modification', '')) for r, s in "
            "ws.scores().items()]\n"
            "for row in rows:\n    print(*row, sep='  ')\n"
            "assert len(rows) >= 2",
        ),
        ("md", "## The best workflow (graph.py and prompt.py, in AFlow's format)"),
        (
            "code",
            "best = Path(summary['best_workflow'])\n"
            "print((best / 'graph.py').read_text())\nprint((best / 'prompt.py').read_text())",
        ),
    ],
    params="config = 'configs/aflow-demo.yaml'   # the embedded defaults\nrounds = 10\nrun_name = 'notebook-aflow'\n"
    "root = 'runs'\nexecutor_checkpoint = ''   # a Plan/Act checkpoint folder; empty = warm-start tiny models once\n"
    "overrides: list[str] = []",
)

REPAIR = notebook(
    [
        (
            "md",
            "# Code repair with graph_planner\n\nBuild a small task corpus from a real package (bugs injected by "
            "mutation, kept only when the package's own tests catch them), run the rule agent on it, then replay one "
            "episode step by step and draw the working memory the patch model would read.",
        ),
        (
            "code",
            "import sys\nfrom pathlib import Path\n\n"
            "ROOT = Path.cwd() if (Path.cwd() / 'configs').is_dir() else Path.cwd().parent\n"
            "sys.path.insert(0, str(ROOT))\n"
            "from graph_planner.corpus.build import build_corpus\n"
            "from graph_planner.corpus.spec import CorpusConfig, PackageSpec, load_corpus_config\n\n"
            "if source:  # a local source folder instead of the pinned sdist\n"
            "    cfg = CorpusConfig(packages=[PackageSpec(name=package, version='local', source=source)])\n"
            "else:\n"
            "    cfg = load_corpus_config(ROOT / corpus_config)\n"
            "    cfg = cfg.model_copy(update={'packages': [p for p in cfg.packages if p.name == package]})\n"
            "cfg = cfg.model_copy(update={'max_tried': max_tried, 'max_kept': max_tried})\n"
            "corpus = Path(out) if Path(out).is_absolute() else ROOT / out\n"
            "summary = build_corpus(cfg, corpus, log=print)\n"
            "summary['packages'][0]",
        ),
        (
            "md",
            "## The rule agent on these tasks\n\nThe baseline: anchor on the traceback, expand to the functions the "
            "failing tests call, try every token-level candidate edit within the test budget, submit.",
        ),
        (
            "code",
            "import pandas as pd\n\n"
            "from graph_planner.env import EnvLimits\n"
            "from graph_planner.evaluate import evaluate_local, summarize\n"
            "from graph_planner.tasks import load_tasks\n\n"
            "tasks = load_tasks(corpus)[:limit]\n"
            "episodes = evaluate_local(tasks, 'rule', workers=1, limits=EnvLimits(test_cpu_s=20))\n"
            "result = summarize(episodes)\n"
            "print(f\"solve rate {result['solve_rate']:.2f}, mean test runs {result['mean_test_runs']}\")\n"
            "pd.DataFrame(episodes)[['instance_id', 'mutation', 'difficulty', 'resolved', 'steps', 'test_runs', "
            "'seconds']]",
        ),
        ("md", "## One episode, step by step"),
        (
            "code",
            "from graph_planner.agents import RuleAgent\nfrom graph_planner.env import PlannerEnv\n\n"
            "task = next((t for t, e in zip(tasks, episodes) if e['resolved']), tasks[0])\n"
            "env, agent = PlannerEnv(limits=EnvLimits(test_cpu_s=20)), RuleAgent()\n"
            "obs = env.reset(task)\nprint(task.problem_statement[:600])\nagent.begin(obs)\n"
            "steps, done = [], False\n"
            "while not done:\n"
            "    action = agent.act(obs)\n"
            "    obs, reward, done, info = env.step(action)\n"
            "    steps.append({'action': action['type'] + ('/' + action['op'] if 'op' in action else ''),\n"
            "                  'detail': (action.get('plan') or str(action.get('anchors') or action.get('nodes') or "
            "action.get('ops') or ''))[:70],\n"
            "                  'tests': (obs.get('tests') or {}).get('status', ''), 'reward': reward})\n"
            "pd.DataFrame(steps)",
        ),
        (
            "md",
            "## The working memory the patch model reads\n\nMemory nodes (blue) and their graph neighbours, then the "
            "linearised text.",
        ),
        (
            "code",
            "import matplotlib\nmatplotlib.use('Agg')\nimport matplotlib.pyplot as plt\nimport networkx as nx\n\n"
            "held = list(env.memory.nodes)\n"
            "near = {o for n in held for kind, _, o in env.graph.neighbours(n) if kind != 'contains'}\n"
            "sub = nx.DiGraph(env.graph.graph.subgraph(set(held) | near))\n"
            "fig, ax = plt.subplots(figsize=(8, 5))\n"
            "pos = nx.spring_layout(sub, seed=0)\n"
            "nx.draw_networkx(sub, pos, ax=ax, node_size=300, font_size=6,\n"
            "                 node_color=['tab:blue' if n in held else 'lightgrey' for n in sub],\n"
            "                 labels={n: n.split('::')[-1] for n in sub})\n"
            "ax.set_axis_off()\nfig.savefig(figure_path, dpi=80)\n"
            "env.runtime.close()\n"
            "print(env.memory.linearize()[:1500])",
        ),
    ],
    params="corpus_config = 'configs/repair-corpus.yaml'\npackage = 'parse'   # one of the shipped packages\n"
    "source = ''   # or a local source folder\nmax_tried = 12\nlimit = 6\nout = 'runs/notebook-corpus'\n"
    "figure_path = 'runs/memory-subgraph.png'",
)


if __name__ == "__main__":
    for name, nb in (
        ("01_quickstart", QUICKSTART),
        ("02_aflow_search", AFLOW),
        ("03_compare_runs", COMPARE),
        ("04_code_repair", REPAIR),
    ):
        nbf.write(nb, HERE / f"{name}.ipynb")
        print("wrote", name)
