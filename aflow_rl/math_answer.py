"""A model's math answer as a sympy expression, without running the answer.

sympy's `parse_expr` ends in `eval` with Python's builtins in reach: scored that way, an answer
`\\boxed{__import__('os')...}` ran in the scorer's process, and one answer could replace the scorer so that
every later answer scored 1 (review 22). Here sympy only rewrites the text into code (`stringify_expr`, which
runs nothing); that code is then checked node by node against a small grammar (numbers, symbols, + - * / **,
a few functions and constants) and evaluated with no builtins. Sizes are bounded before sympy does any work,
so no answer can make the scorer compute for long (`9^{9^{9}}` took it past 30 s).
"""

from __future__ import annotations

import ast
import math
import re
from decimal import Decimal

import sympy
from sympy.parsing.sympy_parser import implicit_multiplication_application, standard_transformations, stringify_expr

MAX_CHARS = 300
"""Longest answer read symbolically (MATH answers are a few dozen characters); longer ones match by text only."""
MAX_NODES = 200
"""Most syntax-tree nodes the rewritten answer may have."""
MAX_DIGITS = 20_000
"""Bound on the decimal digits of any number the answer builds, as estimated from bit lengths (`10^{10000}`
passes, `9^{9^{9}}` does not)."""
MAX_TERMS = 2_000
"""Most terms the answer may have expanded ((x+1)^{100} has 101; (x+y+z)^{100} 5,151 is refused)."""
MAX_FUNCTION_DIGITS = 400
"""Most digits of a transcendental function's argument (mpmath's work grows with it)."""
MAX_SYMBOLIC_EXPONENT = 100
"""Largest literal exponent of an expression with symbols (`(x+1)^{100}`): simplify may expand it."""

_TRANSFORMS = standard_transformations + (implicit_multiplication_application,)  # "2x" means 2*x in answers
# What the transformations write around literals and names: their arguments are literals only.
_CONSTRUCTORS = {"Integer": sympy.Integer, "Float": sympy.Float, "Rational": sympy.Rational, "Symbol": sympy.Symbol}
_FUNCTIONS = {
    name: getattr(sympy, name)
    for name in ("sqrt", "exp", "log", "ln", "sin", "cos", "tan", "cot", "sec", "csc", "asin", "acos", "atan", "Abs")
}
_FUNCTIONS["factorial"] = sympy.factorial  # `5!`; its argument a literal up to MAX_FACTORIAL
MAX_FACTORIAL = 1_000
"""Largest literal n of an answer's n! (1000! has 2,568 digits)."""
_CONSTANTS = {"pi": sympy.pi, "E": sympy.E, "I": sympy.I, "oo": sympy.oo}
NAMESPACE = {**_CONSTRUCTORS, **_FUNCTIONS, **_CONSTANTS}
"""Every name an answer's code may read; anything else the transformations turn into a Symbol."""
_OPS = (ast.Add, ast.Sub, ast.Mult, ast.Div, ast.Pow)


def to_expr(text: str) -> sympy.Basic | None:
    """The answer as a sympy expression, or None when it is not one the grammar above admits."""
    if not isinstance(text, str) or len(text) > MAX_CHARS:
        return None
    try:
        code = stringify_expr(text, {}, dict(NAMESPACE), _TRANSFORMS)
        tree = ast.parse(code, mode="eval")
    except (SyntaxError, ValueError, TypeError, RecursionError, MemoryError, IndexError, KeyError):
        return None
    if sum(1 for _ in ast.walk(tree)) > MAX_NODES or _digits(tree.body) is None or _terms(tree.body) > MAX_TERMS:
        return None
    try:  # checked above: no name outside NAMESPACE, no attribute, no builtins
        return eval(compile(tree, "<answer>", "eval"), {"__builtins__": {}}, dict(NAMESPACE))
    except (ArithmeticError, ValueError, TypeError, RecursionError, MemoryError, sympy.SympifyError):
        return None


def _literal(node: ast.AST) -> float | None:
    """The value of a number literal (as written or as Integer/Float of one), negated or not; else None."""
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        v = _literal(node.operand)
        return None if v is None else -v if isinstance(node.op, ast.USub) else v
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("Integer", "Float"):
        node = node.args[0] if len(node.args) == 1 and not node.keywords else node
    if isinstance(node, ast.Constant) and type(node.value) in (int, float, str):
        try:
            return float(node.value)
        except (ValueError, OverflowError):
            return None
    return None


def _digits(node: ast.AST) -> float | None:
    """An upper bound on the decimal digits of any number `node` builds, or None when `node` is outside the
    grammar or may build a number over MAX_DIGITS digits."""
    found = _size(node)
    return None if found is None or found[0] > MAX_DIGITS else found[0]


def _size(node: ast.AST) -> tuple[float, bool] | None:
    """(digits bound, holds a symbol) of an expression of the grammar; None outside it."""
    if isinstance(node, ast.Constant):
        if type(node.value) is int:
            return _log10(node.value), False
        return (1.0, False) if type(node.value) is float else None
    if isinstance(node, ast.Name):
        return (1.0, False) if node.id in _CONSTANTS else None
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        return _size(node.operand)
    if isinstance(node, ast.BinOp) and isinstance(node.op, _OPS):
        left, right = _size(node.left), _size(node.right)
        if left is None or right is None:
            return None
        if isinstance(node.op, ast.Pow):
            return _power(left, right, node.right)
        digits = left[0] + right[0] if isinstance(node.op, (ast.Mult, ast.Div)) else max(left[0], right[0]) + 1
        return digits, left[1] or right[1]
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and not node.keywords and node.args):
        return None
    name = node.func.id
    if name == "factorial":
        n = _literal(node.args[0]) if len(node.args) == 1 else None
        ok = n is not None and n.is_integer() and 0 <= n <= MAX_FACTORIAL
        return (max(n, 1.0) * math.log10(max(n, 2.0)), False) if ok else None
    if name in _FUNCTIONS and len(node.args) == 1:
        return _function(name, _size(node.args[0]))
    return _constructor(name, node.args)


def _function(name: str, arg: tuple[float, bool] | None) -> tuple[float, bool] | None:
    """The size of a function's value: mpmath's work for sin or exp grows with the argument (sin(1e99999) took
    6 s), and exp's value with its argument's value (sin(exp(exp(20))) ran past 150 s)."""
    if arg is None:
        return None
    digits, symbolic = arg
    if name in ("sqrt", "Abs"):
        return arg
    if digits > MAX_FUNCTION_DIGITS:
        return None
    if name == "exp":
        if symbolic:
            return arg
        return (math.log10(math.e) * 10.0**digits, False) if digits <= 3 else None
    if name in ("log", "ln"):
        return max(1.0, math.log10(digits + 1.0)), symbolic
    # sin, cos, asin, acos, atan are at most ~1.6; tan, cot, sec, csc near a pole as large as a float's precision
    return (1.0 if name in ("sin", "cos", "asin", "acos", "atan") else 20.0), symbolic


def _terms(node: ast.AST) -> float:
    """An upper bound on the terms of the expression expanded (what simplify may build): (x+y+z)^100 has
    5,151, (sqrt(2)+sqrt(3)+sqrt(5)+sqrt(7))^100 176,851 (simplify ran past 30 s on each)."""
    if isinstance(node, ast.BinOp):
        left = _terms(node.left)
        if isinstance(node.op, ast.Pow):
            exponent = _size(node.right)
            value = None if exponent is None else _exponent_value(node.right, exponent)
            if value is None or left <= 1 or abs(value) <= 1:
                return left
            n, k = abs(value), left - 1  # monomials of degree n in k + 1 terms: C(n + k, k)
            log_terms = math.lgamma(n + k + 1) - math.lgamma(k + 1) - math.lgamma(n + 1)
            return math.exp(min(log_terms, 50.0))
        right = _terms(node.right)
        return left + right if isinstance(node.op, (ast.Add, ast.Sub)) else left * right
    if isinstance(node, ast.UnaryOp):
        return _terms(node.operand)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in _FUNCTIONS and node.args:
        return max(_terms(a) for a in node.args)  # simplify works inside a function's argument too
    return 1.0


_DECIMAL = re.compile(r"(\d+\.?\d*|\.\d+)([eE][+-]?\d{1,2})?")


def _constructor(name: str, args: list[ast.AST]) -> tuple[float, bool] | None:
    """The exact forms sympy's transformations write, nothing else: Integer(<int>), Float('<decimal>') (no
    precision argument: Float(64, -100) is a 1-bit float equal to every integer near 64), Rational(Integer,
    Integer), Symbol('<name>'), and Integer(Integer(<int>)) from a repeating decimal."""
    if len(args) == 2 and name == "Rational":
        parts = [_constructor("Integer", a.args) if _is_call(a, "Integer") else None for a in args]
        return None if None in parts else (parts[0][0] + parts[1][0], False)
    if len(args) != 1:
        return None
    (arg,) = args
    value = arg.value if isinstance(arg, ast.Constant) else None
    if name == "Integer":
        if _is_call(arg, "Integer"):
            return _constructor("Integer", arg.args)
        return (_log10(value), False) if type(value) is int else None
    if name == "Float":  # a decimal with an exponent of at most 2 digits: sin(Float('1e99999')) took 6 s
        ok = type(value) is str and _DECIMAL.fullmatch(value)
        return (max(1.0, Decimal(value).adjusted() + 1.0), False) if ok else None
    if name == "Symbol":
        return (0.0, True) if type(value) is str else None
    return None


def _is_call(node: ast.AST, name: str) -> bool:
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == name and not node.keywords


def _log10(n: int) -> float:
    """An upper bound on log10(|n|), from its bit length (0 for 0 and 1)."""
    return abs(n).bit_length() * math.log10(2)


def _power(base: tuple[float, bool], exponent: tuple[float, bool], node: ast.AST) -> tuple[float, bool] | None:
    """The size of base ** exponent, or None when it is not bounded by the limits."""
    digits, symbolic = base
    value = _exponent_value(node, exponent)
    if value is None and not exponent[1]:
        return None  # a numeric exponent too large to bound (2^{99999*99999}): never read as a symbol
    if value is not None:
        if not math.isfinite(value) or (symbolic and abs(value) > MAX_SYMBOLIC_EXPONENT):
            return None
        return digits * max(abs(value), 1.0), symbolic
    if any(isinstance(n, ast.BinOp) and isinstance(n.op, ast.Pow) for n in ast.walk(node)):
        return None  # a tower with a symbol in it: nothing bounds what simplify makes of it
    return digits, True


def _exponent_value(node: ast.AST, size: tuple[float, bool]) -> float | None:
    """A bound on a numeric exponent's value: the literal itself, or 10^digits of a small expression (2^{1/2},
    2^{3*100}); None for an exponent with a symbol in it, or a numeric one past 4 digits."""
    value = _literal(node)
    if value is None and not size[1] and size[0] <= 4:
        value = 10.0 ** size[0]
    return value
