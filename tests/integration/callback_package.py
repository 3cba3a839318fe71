"""The package the call jail's callback attacks repair (test_verdict_jail.py): `spread_by` calls a key function
the tests define (a lambda, a local function), so its jailed child calls them back in the test process. Its
task is a binop mutant (`-` turned `+`)."""

CORE = """
    def spread_by(values, key):
        keys = [key(v) for v in values]
        return max(keys) - min(keys)
    """

TESTS = """
    from hooks.core import spread_by


    def test_spread_by_a_lambda():
        assert spread_by(["aaa", "b", "cc"], lambda s: len(s)) == 2


    def test_spread_by_a_local_function():
        def weight(pair):
            return pair[1]

        assert spread_by([("x", 3), ("y", 10)], weight) == 7
    """

PACKAGE = {"hooks/__init__.py": "", "hooks/core.py": CORE, "tests/test_core.py": TESTS}
