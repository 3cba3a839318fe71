"""The MATH scorer reads a model's answer without running it (review 22): sympy's parse_expr evals its input
with Python's builtins in reach, so an answer could run code in the scorer, end the evaluation or replace the
scorer. Each attack beside an honest control."""

from __future__ import annotations

import pytest

from aflow_rl import benchmarks
from aflow_rl.math_answer import to_expr

PROBLEM = {"answer": r"so \boxed{\frac{1}{2}}"}


def _score(prediction: str) -> float:
    return benchmarks.score("math", PROBLEM, prediction)[0]


def test_an_answer_that_calls_into_python_creates_nothing_and_scores_0(tmp_path):
    marker = tmp_path / "pwned"
    attack = rf"\boxed{{__import__('os').open('{marker}', __import__('os').O_CREAT | __import__('os').O_WRONLY)}}"
    assert _score(attack) == 0.0 and not marker.exists()
    assert _score(r"the answer is \boxed{0.5}") == 1.0  # the honest control


def test_an_answer_cannot_replace_the_scorer_for_later_answers():
    payload = (
        r"\boxed{__import__('builtins').setattr(__import__('sys').modules['aflow_rl.benchmarks'],"
        r"'math_equal',__import__('operator').is_not)}"
    )
    before = benchmarks.math_equal
    assert _score(payload) == 0.0
    assert benchmarks.math_equal is before
    assert _score(r"\boxed{999}") == 0.0 and _score("I don't know") == 0.0  # wrong answers stay wrong
    assert _score(r"\boxed{\frac{2}{4}}") == 1.0


def test_an_answer_that_exits_is_scored_not_raised():
    assert benchmarks.score("math", PROBLEM, r"\boxed{__import__('sys').exit(7)}") == (
        0.0,
        "__import__('sys').exit(7)",
    )
    assert _score(r"\boxed{garbage(}") == 0.0


@pytest.mark.parametrize("answer", [r"9^{9^{9}}", r"(x+1)^{1000}", r"1001!", r"(10^{100})^{1000}", "1" * 400])
def test_answers_too_large_to_compute_are_refused_before_sympy_computes(answer):
    # Refused by their shape (a tower, an exponent or factorial past its limit, an answer past MAX_CHARS):
    # before, `9^{9^{9}}` kept the scorer computing past 30 s, in C code no signal interrupts.
    assert to_expr(benchmarks._latex_to_expr(answer)) is None
    assert _score(rf"\boxed{{{answer}}}") == 0.0
    assert to_expr(benchmarks._latex_to_expr(r"(x+1)^{100}")) is not None  # the honest control: within the limits


@pytest.mark.parametrize(
    "a, b",
    [
        (r"\frac{\sqrt{2}}{2}", r"\frac{1}{\sqrt{2}}"),
        ("(x+1)^2", "x^2+2x+1"),
        ("2(x+1)", "2x+2"),
        ("5!", "120"),
        (r"3\sqrt{3}", r"\sqrt{27}"),
        ("0.[3]", r"\frac{1}{3}"),
        ("2^{10}", "1024"),
        ("xy", "x y"),
    ],
)
def test_equal_answers_written_differently_still_match(a, b):
    assert benchmarks.math_equal(a, b) and benchmarks.math_equal(b, a)
    assert not benchmarks.math_equal(a, b + "+1")


def test_only_the_grammar_is_admitted():
    assert to_expr("2*x + sqrt(3)") is not None
    for text in ("x.__class__", "(1).real", "[1, 2][0]", "lambda: 1", "factorial(x)", "f(x)(y)", "x if y else z"):
        assert to_expr(text) is None, text


# Review 23 (2026-12-02), a second reviewer on the grammar above: no code ran, but these scored or stalled.
@pytest.mark.parametrize(
    "answer",
    [
        "Float(64, Integer('-100'))",  # a 1-bit float: equal to every integer from 48 to 96
        "Float(Rational(1,4), Integer('-100'))",
        "Float(64, 0)",
    ],
)
def test_a_float_with_a_precision_of_its_own_is_not_an_answer(answer):
    assert to_expr(answer) is None
    for reference in ("50", "64", "77", r"\frac{200}{3}"):
        assert benchmarks.score("math", {"answer": rf"\boxed{{{reference}}}"}, rf"\boxed{{{answer}}}")[0] == 0.0
    assert benchmarks.score("math", {"answer": r"\boxed{64}"}, r"\boxed{64}")[0] == 1.0  # the control


@pytest.mark.parametrize(
    "answer",
    [
        "2**(99999*99999)",  # a numeric exponent too large to bound was read as a symbol
        "(x+1)**(999*999)",
        "2**Rational('99999999')",
        "Rational('1e99999999')",  # Fraction expands the exponent
        "sin(Float('1e99999'))",  # mpmath's work grows with the argument
        "sin(Float(2, 999999))",  # a precision of a million digits
        "Rational(Float('1e99999999'))",
        "sin(2**10000)",
    ],
)
def test_answers_whose_size_sympy_cannot_bound_are_refused(answer):
    assert to_expr(answer) is None
    assert _score(rf"\boxed{{{answer}}}") == 0.0


def test_a_comma_is_a_thousands_separator_only():
    lists = {"-2, 1": "-21", "1,2": "12", "3,5,7": "357"}
    for reference, wrong in lists.items():  # AFlow drops every comma: a list read as one number
        assert benchmarks.score("math", {"answer": rf"\boxed{{{reference}}}"}, rf"\boxed{{{wrong}}}")[0] == 0.0
        assert benchmarks.score("math", {"answer": rf"\boxed{{{reference}}}"}, rf"\boxed{{{reference}}}")[0] == 1.0
    assert benchmarks.math_equal("1,000", "1000") and benchmarks.math_equal("12,345.5", "12345.5")


# Review 24 (2026-12-02), a third reviewer: values that grow through functions and expansions, and exact numbers
# compared within the decimal tolerance.
@pytest.mark.parametrize(
    "answer",
    [
        "sin(exp(exp(12)))",  # exp's value sized by its argument's value, not its digits
        "cos(10**exp(12))",
        "(sqrt(2)+sqrt(3)+sqrt(5)+sqrt(7))**100",  # 176,851 terms expanded
        "(x+y+z)**100",
        "(((x+1)**9+1)**9+1)**9",  # each exponent small, degree 729
    ],
)
def test_answers_that_grow_past_their_text_are_refused(answer):
    assert to_expr(answer) is None
    assert to_expr("(x+1)**100") is not None and to_expr("exp(12)") is not None  # the controls


@pytest.mark.parametrize(
    "reference, wrong",
    [
        (r"\frac{1}{2}", r"\frac{1001}{2000}"),
        (r"\frac{1}{1000}", "0"),
        ("2^{64}", "2^{64}+1"),
        ("18446744073709551616", "18446744073709551617"),
        ("10^{20}", "10^{20}+8000"),
    ],
)
def test_exact_numbers_are_compared_exactly(reference, wrong):
    assert benchmarks.score("math", {"answer": rf"\boxed{{{reference}}}"}, rf"\boxed{{{wrong}}}")[0] == 0.0
    assert benchmarks.score("math", {"answer": rf"\boxed{{{reference}}}"}, rf"\boxed{{{reference}}}")[0] == 1.0
    # a decimal keeps AFlow's tolerance of 1e-3, as the paper's figures assume
    assert benchmarks.math_equal("0.333", r"\frac{1}{3}") and benchmarks.math_equal("0.5", r"\frac{1}{2}")
