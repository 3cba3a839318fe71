"""A role's agents receive a RoleSpec: the role's section and the few run-level values they read, and the
same starting model and warm-start demonstrations the run config gave them before."""

from __future__ import annotations

import pickle
import random
from pathlib import Path

from planact.config import load_config
from planact.envs.base import make_env
from planact.initial_models import initial_model_path
from planact.role_spec import RoleSpec, role_spec, warm_start_demos

SMOKE = Path(__file__).resolve().parents[2] / "configs" / "smoke.yaml"


def test_role_spec_holds_the_roles_section_and_the_run_values_its_workers_read(tmp_path):
    cfg = load_config(SMOKE, [f"checkpoint.root={tmp_path}", "seed=7", "actor.resources.trainer_workers=3"])
    spec = role_spec(cfg, "actor")
    assert isinstance(spec, RoleSpec) and spec.role == "actor" and spec.config == cfg.actor
    assert (spec.seed, spec.run_dir, spec.agent_role) == (7, cfg.run_dir(), cfg.agent_role)
    assert spec.namespace == cfg.barrier.namespace
    assert spec.rank_names == ("smoke:actor:rank1", "smoke:actor:rank2")
    # The tiny starting model is built on the driver, the same folder the worker used to build or find.
    assert spec.initial_model() == initial_model_path(cfg, "actor") and spec.initial_model().is_dir()
    assert pickle.loads(pickle.dumps(spec)) == spec  # what Ray sends each agent


def test_a_configured_model_path_is_left_for_the_worker_to_resolve(tmp_path):
    cfg = load_config(SMOKE, [f"checkpoint.root={tmp_path}", f"planner.model_path={tmp_path / 'base'}"])
    spec = role_spec(cfg, "planner")
    assert spec.tiny_model is None and spec.initial_model() == tmp_path / "base"


def test_warm_start_demos_are_the_count_and_draw_the_trainer_made(tmp_path):
    cfg = load_config(SMOKE, [f"checkpoint.root={tmp_path}"])
    env = make_env(cfg)
    ws = cfg.planner.warm_start
    demos = warm_start_demos(env, "planner", ws, seed=3, steps=10_000)
    assert len(demos) == 10_000 * ws.batch_size // 4
    assert demos == env.demonstrations("planner", len(demos), random.Random("3:demos:planner"))
    assert len(warm_start_demos(env, "actor", cfg.actor.warm_start, seed=3)) == 2000  # the floor
