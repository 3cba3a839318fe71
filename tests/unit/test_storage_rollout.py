"""Durable run state and round scoring with per-role credit."""

from planact.config import CreditConfig
from planact.engines.base import Completion
from planact.rollout import actor_requests, clean_plan, score_round
from planact.storage import RunState


def test_run_state_persists(tmp_path):
    s = RunState(tmp_path, "both")
    assert s.next_round == 0
    s.data["last_completed_round"] = 4
    s.save()
    assert RunState(tmp_path, "both").next_round == 5
    assert RunState(tmp_path, "planner").next_round == 0  # two-job mode keeps a state per role


def _c(text, ids=(5,)):
    return Completion(
        prompt_ids=[1],
        token_ids=list(ids),
        logprobs=[-0.5] * len(ids),
        text=text,
        finish_reason="stop",
        weight_version=1,
    )


def test_credit_per_role_and_malformed_counts():
    tasks = [{"task_id": "t", "instruction": "x", "data": "12", "answer": "23", "ops": ["inc"], "but_first": False}]
    plans = [[_c("inc"), _c("?!bogus")]]
    prompts = actor_requests(tasks, plans)
    assert prompts == ["inc:12=", "bogus:12="]
    answers = [[_c("23"), _c("12")], [_c("23"), _c("zz")]]
    res = score_round(tasks, plans, answers, CreditConfig())
    planner_rewards = [s["reward"] for s in res.planner_samples]
    # A valid plan earns the mean outcome of the answers it led to; the malformed plan earns 0 although one
    # answer that ignored it was right (it used to earn 0.5 here).
    assert planner_rewards == [0.5, 0.0]
    actor_rewards = [s["reward"] for s in res.actor_samples]
    assert actor_rewards == [1.0, 0.0, 0.0, 0.0]  # invalid plan -> actor earns nothing
    assert res.metrics["planner/malformed"] == 1 and res.metrics["actor/malformed"] == 1
    assert clean_plan("<eos>inc>sort ") == "eos>inc>sort"  # only plan-language characters survive


def test_fallback_round_has_no_planner_samples():
    tasks = [{"task_id": "t", "instruction": "x", "data": "12", "answer": "23", "ops": ["inc"], "but_first": False}]
    assert actor_requests(tasks, None) == [":12="]
    res = score_round(tasks, None, [[_c("23"), _c("11")]], CreditConfig())
    assert res.planner_samples == [] and [s["reward"] for s in res.actor_samples] == [1.0, 0.0]


def test_a_batch_is_visible_whole_or_not_at_all(tmp_path):
    from planact.experience import ExperienceStore

    store = ExperienceStore(tmp_path)
    store.append([{"id": "a1", "run": "r"}, {"id": "a2", "run": "r"}])
    # A writer killed in the middle of its next batch: part of the batch reached the file, unacknowledged.
    whole = b'{"items":[{"id":"b1","run":"r"},{"id":"b2","run":"r"},{"id":"b3","run":"r"}]}'
    with open(store.file, "ab") as f:
        f.write(whole[: len(whole) // 2])
    reader = ExperienceStore(tmp_path)
    assert sorted(it["id"] for it in reader.query()) == ["a1", "a2"]  # none of b1..b3 (b1 used to show up)
    reader.append([{"id": "c1", "run": "r"}])  # the torn tail is cut off, not glued to the new batch
    assert sorted(it["id"] for it in ExperienceStore(tmp_path).query()) == ["a1", "a2", "c1"]


def test_two_jobs_pruning_the_same_round_folder_at_once_never_fail(tmp_path):
    """Two-job mode: planner and actor jobs prune round folders concurrently; neither may crash."""
    import threading

    from planact.storage import checkpoint_dir, prune_checkpoints

    for trial in range(200):
        run = tmp_path / f"r{trial}"
        for role in ("planner", "actor"):
            for r in (1, 2):
                (checkpoint_dir(run, r) / role).mkdir(parents=True)
        keep = [checkpoint_dir(run, 2)]
        errors: list[BaseException] = []

        def prune(role: str, run=run, keep=keep, errors=errors) -> None:
            try:
                prune_checkpoints(run, keep, [role])
            except BaseException as e:  # noqa: BLE001 - the test reports any failure
                errors.append(e)

        threads = [threading.Thread(target=prune, args=(role,)) for role in ("planner", "actor")]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert not errors, errors
        assert not checkpoint_dir(run, 1).exists() and (checkpoint_dir(run, 2) / "actor").is_dir()


def test_pruning_one_role_leaves_the_other_jobs_checkpoint(tmp_path):
    from planact.storage import checkpoint_dir, prune_checkpoints

    for role in ("planner", "actor"):
        (checkpoint_dir(tmp_path, 1) / role).mkdir(parents=True)
    prune_checkpoints(tmp_path, [checkpoint_dir(tmp_path, 2)], ["planner"])
    assert (checkpoint_dir(tmp_path, 1) / "actor").is_dir() and not (checkpoint_dir(tmp_path, 1) / "planner").exists()
