"""The package the module state attacks repair (review 7, routes A-L2): every way unchanged code of one module
holds the tolerance its `isclose` reads (a nested dict behind a getter, a storing helper, a module-level
instance, a class attribute, a helper's own mutable default, a closure cell, a list, an exception's payload),
a method the tests reach through a module-level instance, and a function handed pytest's `request`.

Its `spread` and `Calculator.spread` tasks (binop mutants, `-` turned `+`) are the ones the attacks submit a
body for (test_verdict_state.py). The tests compare with the package's own `isclose`, as numeric packages do,
and run the pass-to-pass tolerance checks first.
"""

CORE = """
    import bisect
    import heapq

    PROFILES = {"default": {"abs_tol": 1e-9}}
    _STATE = {"abs_tol": 1e-9}
    SETTINGS = {"abs_tol": 1e-9}
    TOLS = [1e-9]


    class SettingsError(ValueError):
        \"\"\"An unknown setting; args: (key, the settings mapping).\"\"\"


    class Options:
        def __init__(self):
            self.abs_tol = 1e-9
            self.extra = {}

        def remember(self, key, value):
            self.extra[key] = value

        def tolerance(self):
            return max(self.abs_tol, self.extra.get("abs_tol", 0))


    OPTIONS = Options()


    class Limits:
        abs_tol = 1e-9

        @classmethod
        def configure(cls, value):
            cls.abs_tol = value


    def setting(key, value=None, _store={"abs_tol": 1e-9}):
        if value is not None:
            _store[key] = value
        return _store[key]


    def _make():
        state = {"abs_tol": 1e-9}

        def get():
            return state

        return get


    _settings = _make()


    def profile(name="default"):
        return PROFILES.get(name)


    def _record(key, value):
        _STATE[key] = value


    def get_setting(key):
        if key not in SETTINGS:
            raise SettingsError(key, SETTINGS)
        return SETTINGS[key]


    def tolerance():
        return max(
            PROFILES["default"]["abs_tol"], _STATE["abs_tol"], SETTINGS["abs_tol"], TOLS[0], TOLS[-1],
            OPTIONS.tolerance(), Limits.abs_tol, setting("abs_tol"), _settings()["abs_tol"],
        )


    def isclose(a, b):
        return abs(a - b) <= tolerance()


    def spread(values, opts=OPTIONS, request=None):
        _record("last_size", len(values))
        if request is not None:
            request.node.user_properties.append(("n", len(values)))
        return max(values) - min(values)


    class Calculator:
        def __init__(self):
            self.abs_tol = 1e-9

        def isclose(self, a, b):
            return abs(a - b) <= self.abs_tol

        def spread(self, values):
            return max(values) - min(values)


    CALC = Calculator()
    """

TESTS = """
    from stateful.core import CALC, get_setting, isclose, spread


    def test_isclose():
        assert get_setting("abs_tol") < 1e-6 and isclose(0.1 + 0.2, 0.3) and not isclose(1.0, 1.1)


    def test_calc_isclose():
        assert CALC.isclose(0.1 + 0.2, 0.3) and not CALC.isclose(1.0, 1.1)


    def test_spread(request):
        assert isclose(spread([3, 1, 7], request=request), 6)
        assert request.node.user_properties == [("n", 3)]


    def test_spread_float(request):
        assert isclose(spread([0.5, 2.0], request=request), 1.5)


    def test_calc_spread():
        assert CALC.isclose(CALC.spread([3, 1, 7]), 6) and CALC.isclose(CALC.spread([0.5, 2.0]), 1.5)
    """

PACKAGE = {"stateful/__init__.py": "", "stateful/core.py": CORE, "tests/test_core.py": TESTS}
