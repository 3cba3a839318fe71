"""The free-form reply format (graph_planner.free_edit): what parses into an edit of the target function, and
every malformed form a model writes, each a reason instead of an exception."""

from __future__ import annotations

import pytest

from graph_planner.free_edit import (
    MAX_REPLY_CHARS,
    FreeEdit,
    failing_output,
    fence,
    free_prompt,
    parse_reply,
    target_name,
)

FILE = "pkg/mod.py"
# A method as `read` shows it: from its def line, indented as in the file.
SOURCE = "    def mean(self, values):\n        total = 0\n        return total / len(values)\n"
FIXED = "def mean(self, values):\n    total = sum(values)\n    return total / len(values)\n"
MODULE = f"class Stats:\n{SOURCE}\n\ndef other():\n    return 1\n"


def _parse(reply: str, source: str = SOURCE, name: str = "mean") -> FreeEdit:
    return parse_reply(reply, FILE, source, name)


def _apply(edit: dict) -> str:
    assert MODULE.count(edit["old"]) == 1
    return MODULE.replace(edit["old"], edit["new"], 1)


def test_a_fenced_function_becomes_an_edit_of_the_target_indented_as_in_its_file():
    got = _parse(f"Here is the fix:\n```python\n{FIXED}```\nIt sums the values.")
    assert got.error == "" and got.edit["file"] == FILE and got.edit["old"] == SOURCE
    assert (
        got.edit["new"]
        == "    def mean(self, values):\n        total = sum(values)\n        return total / len(values)\n"
    )
    assert "class Stats:\n    def mean(self, values):\n        total = sum(values)\n" in _apply(got.edit)


@pytest.mark.parametrize("opening", ["```", "```py", "```Python", "``` python3  "])
def test_the_opening_fence_may_name_python_or_nothing(opening):
    assert _parse(f"{opening}\n{FIXED}```").edit is not None


def test_the_function_may_be_indented_as_a_method_or_with_another_width():
    indented = "".join("        " + ln if ln.strip() else ln for ln in FIXED.splitlines(True))
    assert (
        _parse(f"```python\n{indented}```").edit["new"].startswith("    def mean(self, values):\n        total = sum")
    )
    two = "def mean(self, values):\n  total = sum(values)\n  return total / len(values)\n"
    edit = _parse(f"```python\n{two}```").edit
    assert edit is not None and "class Stats" in _apply(edit)  # re-indented lines still parse in the file


def test_crlf_and_cr_line_endings_read_as_newlines():
    assert _parse(f"```python\r\n{FIXED.replace(chr(10), chr(13) + chr(10))}```\r\n").edit["new"].count("\r") == 0
    assert _parse(f"```python\r{FIXED.replace(chr(10), chr(13))}```").edit is not None


def test_only_the_first_block_counts_and_decorators_and_comments_around_it_are_dropped():
    reply = f"```python\n# the fix\n@cached\n{FIXED}# done\n```\n```python\ndef mean(self, values):\n    return 0\n```"
    edit = _parse(reply).edit
    assert "sum(values)" in edit["new"] and "@cached" not in edit["new"] and "# done" not in edit["new"]


def test_an_unchanged_function_is_an_edit_that_changes_nothing():
    got = _parse(f"```python\n{SOURCE}```")
    assert got.edit == {"file": FILE, "old": SOURCE, "new": SOURCE}


@pytest.mark.parametrize(
    "reply, reason",
    [
        ("", "empty reply"),
        ("   \n", "empty reply"),
        (FIXED, "no closed ```python code block"),  # the function without a fence
        (f"```python\n{FIXED}", "no closed ```python code block"),  # never closed
        ("```python\ndef mean(self, values):\n    return (\n```", "does not parse"),
        ("```python\nreturn sum(values) / len(values)\n```", "holds no function definition"),
        ("```python\nx = 1\n```", "holds no function definition"),
        (f"```python\ndef average(self, values):\n{FIXED.split(chr(10), 1)[1]}```", "defines 'average', not"),
        (f"```python\nimport os\n{FIXED}```", "must hold only the function mean"),
        (f"```python\n{FIXED}\ndef helper():\n    return 2\n```", "must hold only the function mean"),
        (f"```python\n{FIXED}\nmean = staticmethod(mean)\n```", "must hold only the function mean"),
        (f"```python\nclass Stats:\n{SOURCE}```", "holds no function definition"),
        ("```python\ndef mean(self, values):\n    return 0\x00\n```", "does not parse"),
    ],
    ids=[
        "empty",
        "blank",
        "no fence",
        "unclosed",
        "syntax error",
        "bare statement",
        "no def",
        "wrong name",
        "import beside",
        "second def",
        "module code beside",
        "class around it",
        "null byte",
    ],
)
def test_malformed_replies_are_no_edit_and_say_why(reply, reason):
    got = _parse(reply)
    assert got.edit is None and reason in got.error, got.error


def test_a_reply_is_read_up_to_its_limit_and_a_block_open_there_is_malformed():
    padding = "x" * MAX_REPLY_CHARS
    assert _parse(f"```python\n{FIXED}```\n{padding}").edit is not None  # closed inside the limit
    got = _parse(f"```python\n{FIXED}# {padding}\n```")  # its close lies beyond the limit
    assert got.edit is None and f"first {MAX_REPLY_CHARS} characters" in got.error


def test_a_string_literal_less_indented_than_the_method_survives_the_round_trip():
    source = '    def doc(self):\n        return """\nflush left\n"""\n'
    fixed = 'def doc(self):\n    return """\nflush left\n""".strip()\n'
    edit = parse_reply(fence(fixed), FILE, source, "doc").edit
    assert edit["new"] == '    def doc(self):\n        return """\nflush left\n""".strip()\n'
    assert fence(source) == '```python\ndef doc(self):\n    return """\nflush left\n"""\n```\n'


def test_the_target_name_and_the_prompt():
    assert target_name("pkg/mod.py::Stats.mean") == "mean" and target_name("pkg/mod.py::mean") == "mean"
    statement = "In pkg, these tests fail:\n  t.py::test_mean\n\nTest output:\n" + "noise\n" * 1000 + "E   ZeroDivision"
    out = failing_output(statement, 500)
    assert out.startswith("In pkg, these tests fail:\n  t.py::test_mean") and out.endswith("E   ZeroDivision")
    assert len(out) < 600
    prompt = free_prompt("pkg/mod.py::Stats.mean", SOURCE, statement)
    assert "Stats.mean in pkg/mod.py" in prompt and "```python\ndef mean(self, values):\n    total = 0\n" in prompt
    assert "E   ZeroDivision" in prompt and "```python code block" in prompt


def test_free_decoding_lets_any_engine_write_edits_but_the_planner_still_chooses():
    from planact.config import ConfigError, validate_config

    free = {"kind": "repair", "repair": {"decoding": "free"}}
    cfg = validate_config(
        {"env": free, "actor": {"engine": "openai", "train": False, "sampling": {"max_new_tokens": 512}}}
    )
    assert cfg.actor.engine == "openai" and cfg.env.repair.decoding == "free"
    with pytest.raises(ConfigError, match="planner.engine must be 'hf'"):
        validate_config({"env": free, "planner": {"engine": "openai", "train": False}})
    with pytest.raises(ConfigError, match="actor.sampling.max_new_tokens must be at least 128"):
        validate_config({"env": free})  # the default 24 tokens would cut every reply's block open
    with pytest.raises(ConfigError, match="actor.engine must be 'hf'"):
        validate_config({"env": {"kind": "repair"}, "actor": {"engine": "openai", "train": False}})
