"""The six benchmarks' scorers on tricky cases, with the score AFlow's own scorers give each.

Each case states the prediction, the gold answer and AFlow's verdict, worked out from AFlow's
benchmark code (GSM8K: last number, commas only as thousands separators; MATH: last boxed or last
sentence, numeric with percentages, symbolic via sympy; HumanEval/MBPP: sanitised solution run
against the tests, prompt helpers available, MBPP's `check()` calls the function by name; HotpotQA:
SQuAD F1 with 0 for no overlap; DROP: max F1 over '|' alternatives on both sides). Code cases run in
the real sandbox.
"""

from __future__ import annotations

import pytest

from aflow_rl.benchmarks import load_problems, score

CASES = [
    # benchmark, problem, prediction, AFlow's score
    ("gsm8k", {"answer": "... #### 3"}, "The answers are 1,2,3", 1.0),  # commas between numbers are not thousands
    ("gsm8k", {"answer": "#### 1234"}, "She pays $1,234 in total.", 1.0),
    ("gsm8k", {"answer": "#### 123"}, "answers 1,2,3", 0.0),  # the old scorer deleted every comma -> 123 -> 1
    ("gsm8k", {"answer": "#### 18"}, "18.0000001", 1.0),
    ("math", {"answer": r"so \boxed{\frac34}"}, r"Thus \boxed{\dfrac{3}{4}}", 1.0),
    ("math", {"answer": r"\boxed{0.5}"}, r"\boxed{50\%}", 1.0),
    ("math", {"answer": r"\boxed{\frac{1}{\sqrt{2}}}"}, r"\boxed{\frac{\sqrt{2}}{2}}", 1.0),
    ("math", {"answer": r"\boxed{(x+1)^2}"}, r"\boxed{x^2+2x+1}", 1.0),
    ("math", {"answer": r"\boxed{1,000}"}, r"\boxed{1000}", 1.0),
    ("math", {"answer": r"\boxed{5}"}, "The answer is 5. Done", 0.0),  # no box: the last sentence, "Done"
    ("math", {"answer": r"\boxed{5}"}, r"\boxed{6}", 0.0),
    ("hotpotqa", {"answer": "the"}, "a", 0.0),  # both normalise to empty: no overlap scores 0 (was 1)
    ("hotpotqa", {"answer": "Barack Obama"}, "obama", 2 * (1 * 0.5) / 1.5),
    ("drop", {"answer": "4|four"}, "five|4", 1.0),  # predictions split on '|' too (was 0)
    ("drop", {"answer": "12"}, "twelve", 0.0),
]


@pytest.mark.parametrize("bench,problem,prediction,expected", CASES)
def test_text_scorers_agree_with_aflow(bench, problem, prediction, expected):
    assert score(bench, problem, prediction)[0] == pytest.approx(expected)


@pytest.fixture(scope="module")
def humaneval():
    return {p["entry_point"]: p for p in load_problems("humaneval")}


def test_humaneval_sanitises_fences_and_provides_prompt_helpers(humaneval):
    p = humaneval["has_close_elements"]
    fenced = f"Here you go:\n```python\n{p['question'] + p['answer']}\n```\nHope it helps."
    assert score("humaneval", p, fenced)[0] == 1.0  # was 0: the prose around the fence was run as code
    # HumanEval/38: decode_cyclic's tests call encode_cyclic, which only the prompt defines.
    d = humaneval["decode_cyclic"]
    body_only = "def decode_cyclic(s: str):\n    return encode_cyclic(encode_cyclic(s))\n"
    assert score("humaneval", d, body_only)[0] == 1.0  # was 0: encode_cyclic undefined
    completion = d["answer"]  # a bare body completing the prompt's signature
    assert score("humaneval", d, completion)[0] == 1.0


MBPP_PROBLEM = {
    "id": "mbpp-2",
    "entry_point": "similar_elements",
    "question": "Write a function to find the shared elements from the given two lists.\n\n"
    "assert set(similar_elements((3, 4, 5, 6),(5, 7, 4, 10))) == set((4, 5))",
    "answer": "",
    "test": (
        "def check():\n    assert set(similar_elements((3, 4, 5, 6),(5, 7, 4, 10))) == set((4, 5))\n"
        "    assert set(similar_elements((1, 2, 3, 4),(5, 4, 3, 7))) == set((3, 4))\n"
    ),
}


def test_mbpp_in_aflows_format_scores_a_correct_solution_one():
    right = "def similar_elements(a, b):\n    return tuple(set(a) & set(b))\n"
    wrong = "def similar_elements(a, b):\n    return tuple(a)\n"
    assert score("mbpp", MBPP_PROBLEM, right)[0] == 1.0  # every MBPP problem used to score 0
    assert score("mbpp", MBPP_PROBLEM, wrong)[0] == 0.0


def test_the_test_operator_runs_mbpp_public_asserts():
    import asyncio

    from aflow_rl.operators import Test

    class NoLLM:
        async def __call__(self, prompt):
            return "```python\ndef similar_elements(a, b):\n    return tuple(set(a) & set(b))\n```"

    wrong = "def similar_elements(a, b):\n    return ()\n"
    out = asyncio.run(Test(NoLLM())(MBPP_PROBLEM["question"], wrong, "similar_elements", test_loop=2))
    # The public assert fails for the wrong solution (it used to "pass": MBPP has no >>> lines), the
    # operator asks for a fix and the fixed solution passes.
    assert out["result"] is True and "set(a) & set(b)" in out["solution"]
