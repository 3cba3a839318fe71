"""Property-based fuzzing (Hypothesis) of every parser of model output and user input.

Model output is hostile and user input is careless: each parser must either return a well-formed value
or reject the input with its own clear error type, never crash with anything else, for thousands of
generated inputs. Inputs mix pure noise with near-misses built from valid examples (the cases that
slip through). Examples are derandomized, so a failure reproduces on every machine; the counts are
per test (`pytest tests/unit/test_fuzz.py --hypothesis-show-statistics` prints them).
"""

from __future__ import annotations

import json

import yaml
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from aflow_rl import space
from aflow_rl.benchmarks import SCORERS, score
from aflow_rl.optimizers import LLMOptimizer
from aflow_rl.workflow import validate
from graph_planner.actions import ActionError, Explore, Memory, Repair, Submit, parse_action
from graph_planner.patching import PatchError, apply_diff
from planact.config import ConfigError, RunConfig, flatten, load_config, validate_config
from planact.envs.plan_act import OPS, PLAN_SEP, format_plan, parse_plan

# derandomized: every run replays the same examples, so more of them find nothing new after the first run
MANY = settings(
    max_examples=1000,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
SOME = settings(max_examples=250, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])

noise = st.text(alphabet=st.characters(codec="utf-8"), max_size=200)


# --- the planner's plans (synthetic env) ---

plan_like = st.lists(st.sampled_from([*OPS, "", " ", "inc ", "SORT", "x", PLAN_SEP, "\n", "\x00"]), max_size=6).map(
    "".join
)


@MANY
@given(st.one_of(noise, plan_like))
def test_plans_parse_to_known_ops_or_none(text):
    ops = parse_plan(text)
    assert ops is None or (ops and all(op in OPS for op in ops) and parse_plan(format_plan(ops)) == ops)


# --- graph_planner actions ---

json_scalar = st.one_of(
    st.none(), st.booleans(), st.integers(-5, 10**12), st.floats(allow_nan=True), st.text(max_size=30)
)
json_value = st.recursive(
    json_scalar,
    lambda kids: st.lists(kids, max_size=4) | st.dictionaries(st.text(max_size=8), kids, max_size=4),
    max_leaves=20,
)
action_dict = st.fixed_dictionaries(
    {"type": st.sampled_from(["explore", "memory", "repair", "submit", "Submit", "", "delete"])},
    optional={
        "op": st.sampled_from(["find", "read", "expand", "add", "rm"]) | json_scalar,
        "nodes": st.lists(st.text(max_size=40), max_size=12) | json_value,
        "anchors": st.lists(st.text(max_size=40), max_size=12) | json_value,
        "hop": st.integers(-3, 9) | json_scalar,
        "ops": st.lists(
            st.fixed_dictionaries(
                {"op": st.sampled_from(["add", "remove", "keep", "x"]), "node": st.text(max_size=20)}
            ),
            max_size=25,
        )
        | json_value,
        "patch": st.text(max_size=300),
        "plan": st.text(max_size=100),
        "apply": json_scalar,
        "edits": st.lists(
            st.fixed_dictionaries(
                {"file": st.text(max_size=20), "old": st.text(max_size=20), "new": st.text(max_size=20)}
            ),
            max_size=22,
        )
        | json_value,
    },
)


@MANY
@given(
    st.one_of(
        noise,
        action_dict,
        action_dict.map(json.dumps),
        action_dict.map(lambda d: f"Sure, here it is:\n```json\n{json.dumps(d)}\n```\nthanks"),
        json_value,
        json_value.map(json.dumps),
    )
)
def test_actions_parse_or_raise_action_error(raw):
    try:
        action = parse_action(raw)
    except ActionError as err:
        assert str(err)  # the message goes back to the model
    else:
        assert isinstance(action, (Explore, Memory, Repair, Submit))


# --- unified diffs (Repair.patch) ---

FILES = {"pkg/mod.py": "def f(x):\n    return x + 1\n\n\ndef g(y):\n    return y * 2\n"}
path_like = st.sampled_from(
    [
        "a/pkg/mod.py",
        "b/pkg/mod.py",
        "pkg/mod.py",
        "a/../etc/passwd",
        "/etc/passwd",
        "a/tests/test_mod.py",
        "/dev/null",
        "a/pkg/new.py",
        "a/pkg/mod.py\x00",
        "",
    ]
)
hunk_line = st.sampled_from(
    [
        " def f(x):",
        "-    return x + 1",
        "+    return x - 1",
        " ",
        "\\ No newline at end of file",
        "@@ -1,2 +1,2 @@",
        "@@ -99,1 +99,1 @@",
        "+import os",
        "-",
        "garbage",
    ]
) | st.text(max_size=30)
diff_like = st.tuples(path_like, path_like, st.lists(hunk_line, max_size=12)).map(
    lambda t: f"--- {t[0]}\n+++ {t[1]}\n" + "\n".join(t[2])
)


@MANY
@given(st.one_of(noise, diff_like, st.lists(diff_like, max_size=3).map("\n".join)))
def test_diffs_apply_inside_the_repo_or_raise_patch_error(diff):
    try:
        out = apply_diff(diff, lambda p: FILES[p], set(FILES))
    except PatchError as err:
        assert str(err)
    else:
        assert set(out) <= set(FILES)  # no other file, no escape, no test file


# --- AFlow: workflow code and the LLM optimizer's answer ---

GRAPH, PROMPT = space.render(space.initial_spec("gsm8k"))
graph_lines = GRAPH.splitlines()


@st.composite
def mutated_graph(draw):
    """The valid initial graph with lines dropped, duplicated or replaced by hostile ones."""
    lines = list(graph_lines)
    for _ in range(draw(st.integers(1, 4))):
        i = draw(st.integers(0, len(lines) - 1))
        lines[i : i + 1] = draw(
            st.sampled_from(
                [
                    [],
                    [lines[i], lines[i]],
                    ["        import os"],
                    ["        __import__('os').system('id')"],
                    ["        while True: pass"],
                    ["        return open('/etc/passwd').read()"],
                    ["        x = ().__class__.__bases__[0].__subclasses__()"],
                    ["        " + lines[i].strip()[::-1]],
                    [lines[i].replace("self.", "self._")],
                    [lines[i] + " ** 99999"],
                ]
            )
        )
    return "\n".join(lines)


@SOME
@given(st.one_of(noise, mutated_graph()), st.one_of(st.just(PROMPT), noise))
@example("\x00", PROMPT)  # a null byte: ValueError, not SyntaxError, from Python 3.11.2's parser (found on it)
@example(GRAPH, "X = 1\x00")
def test_workflow_code_validates_without_running_or_crashing(graph, prompt):
    v = validate(graph, prompt)
    assert v.ok == (not v.errors)
    if any(bad in graph for bad in ("import os", "__import__", "open(", "while True", "__subclasses__")):
        assert not v.ok


answer_part = (
    st.sampled_from(
        [
            "<modification>add a review step</modification>",
            f"<graph>{GRAPH}</graph>",
            f"<graph>\n```python\n{GRAPH}\n```\n</graph>",
            f"<prompt>{PROMPT}</prompt>",
            "<prompt>X = 'unterminated</prompt>",
            "<graph>",
            "</prompt>",
            f"```python\n{GRAPH}\n```",
            "<modification></modification>",
        ]
    )
    | noise
)


@SOME
@given(st.lists(answer_part, max_size=5).map("\n".join))
def test_optimizer_answers_are_repaired_or_listed_as_problems(answer):
    modification, graph, prompt, problems = LLMOptimizer.repair(answer, PROMPT)
    assert isinstance(problems, list) and isinstance(prompt, str)
    if not problems:
        assert modification and graph is not None


# --- the AFlow optimizer model's edit lines (WorkflowEnv) ---

edit_words = st.sampled_from(
    [
        w
        for e in space.catalogue("planact") + space.catalogue("qa") + space.catalogue("code")
        for w in str(e.key).split(":")
    ]
    + ["", " ", "\n", "votes", "add", "7", "-1", "None"]
)


@MANY
@given(st.one_of(noise, st.lists(edit_words, max_size=5).map(" ".join)), st.sampled_from(["planact", "qa", "code"]))
def test_optimizer_edit_lines_parse_to_a_catalogue_edit_or_none(text, family):
    from aflow_rl.env import edit_text, parse_edit

    edit = parse_edit(text, family)
    assert edit is None or (edit in space.catalogue(family) and text.strip().startswith(edit_text(edit).split()[0]))


# --- benchmark answer extraction ---

PROBLEMS = {
    "gsm8k": {"question": "q", "answer": "#### 42"},
    "math": {"question": "q", "answer": "\\boxed{\\frac{1}{2}}"},
    "hotpotqa": {"question": "q", "answer": "Paris"},
    "drop": {"question": "q", "answer": "3|three"},
    "planact": {"question": "q", "answer": "1234"},
}
prediction = st.one_of(
    noise,
    st.none(),
    st.integers(),
    st.floats(allow_nan=True),
    st.sampled_from(
        [
            "42",
            "#### 42",
            "\\boxed{1/2}",
            "\\boxed{",
            "\\frac{1}{0}",
            "1e999",
            "Paris",
            "The answer is 42.",
            "nan",
            "-0",
            "1,234",
            "\\boxed{\\boxed{}}",
        ]
    ),
)


@MANY
@given(st.sampled_from(sorted(PROBLEMS)), prediction)
def test_benchmark_scores_stay_in_range_and_never_raise(benchmark, pred):
    value, extracted = score(benchmark, PROBLEMS[benchmark], pred)
    assert 0.0 <= value <= 1.0 and isinstance(extracted, str)
    assert not extracted.startswith("scorer error"), extracted  # a scorer must handle odd output itself
    assert set(PROBLEMS) <= set(SCORERS)


# --- configs: --set overrides, YAML files, Prefect parameters ---

FIELDS = sorted(flatten(RunConfig()))
key_like = st.one_of(
    st.sampled_from(FIELDS),
    st.sampled_from(FIELDS).map(lambda k: k + "x"),
    st.sampled_from(FIELDS).map(lambda k: k.rsplit(".", 1)[0]),
    st.text(max_size=20).filter(lambda k: "=" not in k),
)  # the first "=" ends the key
value_text = st.one_of(
    st.sampled_from(
        [
            "-1",
            "0",
            "1e9",
            "nan",
            "inf",
            "true",
            "null",
            "[1, 2]",
            "{a: 1}",
            "''",
            "'",
            "x: [",
            "!!python/object:os.system",
            "1e-400",
            "99999999999999999999",
        ]
    ),
    st.text(max_size=20),
)


@MANY
@given(key_like, value_text)
def test_overrides_load_or_name_the_field(key, value):
    try:
        cfg = load_config(None, [f"{key}={value}"])
    except ConfigError as err:
        msg = str(err)
        # It names the override, or the field (an unknown one by its first unknown segment).
        assert msg and ("override" in msg or any(seg.strip() in msg for seg in key.split(".") if seg.strip())), msg
    else:
        assert isinstance(cfg, RunConfig)


yaml_doc = st.one_of(
    noise,
    st.dictionaries(st.sampled_from(["rounds", "seed", "planner", "env", "x"]), json_value, max_size=4).map(
        yaml.safe_dump
    ),
)


@SOME
@given(yaml_doc)
def test_yaml_config_files_load_or_raise_config_error(tmp_path_factory, text):
    path = tmp_path_factory.mktemp("cfg") / "run.yaml"
    path.write_text(text)
    try:
        load_config(path)
    except ConfigError as err:
        assert str(err)


@MANY
@given(
    st.dictionaries(
        st.sampled_from(["rounds", "seed", "run_name", "planner", "actor", "env", "tracking", "zzz"]),
        json_value,
        max_size=5,
    )
)
def test_prefect_parameters_validate_or_raise_config_error(params):
    # What the Prefect UI or `prefect deployment run --param` posts: any JSON.
    try:
        assert isinstance(validate_config(params), RunConfig)
    except ConfigError as err:
        assert str(err)
