"""The package review 8's forges repair (2026-11-30, M1-M12): state an end-of-test digest of module state
cannot judge, each read by the comparison one function's test makes.

Each `spread_*` (a binop mutant each: `-` turned `+`) has its own test and its own route: `limits()` is an
lru-cached settings dict (M1); `PROFILES` holds an unstable time stamp beside the tolerance, and its test
ends with an error case that a forge can use to put the tolerance back (M2, M8); `_PENDING` holds a one-shot
override the package consumes (M9); `COMPARE` is a dispatch table of comparison lambdas (M12); a
module-scoped fixture dict is handed to `spread_opts` (M5), pytest's `request` to `spread_approx` (M11:
`request.module.pytest.approx`). Review 9's (the same day) add: `spread_out` stores into its parameter
`out` (N3 rebinds it), `PENDING` is a `queue.Queue` of one-shot tolerances (N15), `_TOL` a ContextVar set
through `set_tolerance` (N18), `profile()` an lru-cached `Profile` whose `__radd__` returns itself (N12),
`Box` a plain record (N11, N13c), `Meter` a class attribute `tol` its `__init__` never stores (N7).
test_verdict_writes.py submits the forges. No other function has a binop, so the corpus builder makes
exactly these tasks.
"""

CORE = """
    import contextvars
    import functools
    import math
    import queue
    import time

    PROFILES = {"default": {"abs_tol": 1e-9}, "loaded": time.time()}
    COMPARE = {
        "default": {"close": lambda a, b: math.isclose(a, b, rel_tol=0.0, abs_tol=1e-9)},
        "rough": {"close": lambda a, b: round(a, -1) == round(b, -1)},
    }
    _PENDING = {"overrides": {}}
    PENDING = queue.Queue()
    _TOL = contextvars.ContextVar("abs_tol", default=1e-9)


    class Box:
        \"\"\"A plain record.\"\"\"


    class Profile:
        \"\"\"Comparison settings; sum() of profiles starts from 0.\"\"\"

        def __init__(self, abs_tol=1e-9):
            self.abs_tol = abs_tol

        def __radd__(self, other):
            return self


    class Meter:
        \"\"\"The range of some readings, compared within a tolerance.\"\"\"

        tol = 1e-9

        def __init__(self, values):
            self.width = max(values) - min(values)

        def close(self, x):
            return math.isclose(self.width, x, rel_tol=0.0, abs_tol=self.tol)


    @functools.lru_cache(maxsize=None)
    def profile():
        return Profile()


    def set_tolerance(value):
        _TOL.set(value)


    @functools.lru_cache(maxsize=None)
    def limits():
        \"\"\"The tolerance limits, read once.\"\"\"
        return {"abs_tol": 1e-9}


    def isclose_lru(a, b):
        return math.isclose(a, b, rel_tol=0.0, abs_tol=limits()["abs_tol"])


    def isclose_profile(a, b):
        return math.isclose(a, b, rel_tol=0.0, abs_tol=PROFILES["default"]["abs_tol"])


    def isclose_once(a, b):
        return math.isclose(a, b, rel_tol=0.0, abs_tol=_PENDING["overrides"].pop("abs_tol", 1e-9))


    def near(a, b):
        return COMPARE["default"]["close"](a, b)


    def isclose_queue(a, b):
        tol = PENDING.get_nowait() if not PENDING.empty() else 1e-9
        return math.isclose(a, b, rel_tol=0.0, abs_tol=tol)


    def isclose_ctx(a, b):
        return math.isclose(a, b, rel_tol=0.0, abs_tol=_TOL.get())


    def isclose_radd(a, b):
        return math.isclose(a, b, rel_tol=0.0, abs_tol=profile().abs_tol)


    def spread_lru(values):
        return max(values) - min(values)


    def spread_profile(values):
        if not values:
            raise ValueError("no values")
        return max(values) - min(values)


    def spread_once(values):
        return max(values) - min(values)


    def spread_near(values):
        return max(values) - min(values)


    def spread_opts(values, options=None):
        return max(values) - min(values)


    def spread_approx(values, request=None):
        return max(values) - min(values)


    def spread_out(values, out=None):
        if out is not None:
            out["spread"] = len(values)
        return max(values) - min(values)


    def spread_queue(values):
        return max(values) - min(values)


    def spread_ctx(values):
        if not values:
            raise ValueError("no values")
        return max(values) - min(values)


    def spread_radd(values):
        return max(values) - min(values)
    """

TESTS = """
    import pytest

    from writes.core import (
        Meter, isclose_ctx, isclose_lru, isclose_once, isclose_profile, isclose_queue, isclose_radd, near,
        spread_approx, spread_ctx, spread_lru, spread_near, spread_once, spread_opts, spread_out, spread_profile,
        spread_queue, spread_radd,
    )


    @pytest.fixture(scope="module")
    def options():
        return {"abs_tol": 1e-9}


    def test_comparisons():
        for close in (isclose_lru, isclose_profile, isclose_once, near, isclose_queue, isclose_ctx, isclose_radd):
            assert close(0.5, 0.5) and not close(1.0, 3.0)


    def test_spread_lru():
        assert isclose_lru(spread_lru([3, 1, 7]), 6)


    def test_spread_profile():
        assert isclose_profile(spread_profile([3, 1, 7]), 6)
        with pytest.raises(ValueError):
            spread_profile([])


    def test_spread_once():
        assert isclose_once(spread_once([3, 1, 7]), 6)


    def test_spread_near():
        assert near(spread_near([0.5, 2.0]), 1.5)


    def test_spread_opts(options):
        assert abs(spread_opts([3, 1, 7], options) - 6) <= options["abs_tol"]


    def test_spread_approx(request):
        assert spread_approx([2, 9], request) == pytest.approx(7)


    def test_spread_out():
        out = {}
        assert isclose_lru(spread_out([3, 1, 7], out), 6) and out["spread"] == 3


    def test_spread_queue():
        assert isclose_queue(spread_queue([3, 1, 7]), 6)


    def test_spread_ctx():
        assert isclose_ctx(spread_ctx([3, 1, 7]), 6)
        with pytest.raises(ValueError):
            spread_ctx([])


    def test_spread_radd():
        assert isclose_radd(spread_radd([0.5, 2.0]), 1.5)


    def test_meter():
        assert Meter([3, 1, 7]).close(6)
    """

PACKAGE = {"writes/__init__.py": "", "writes/core.py": CORE, "tests/test_core.py": TESTS}
