"""Patches that steer a gadget through control flow alone: (name, old, new) cases for the patch check's tests.

Each changes only which unchanged statements run (a condition, a loop's bound, a `break`, a `raise`) so that a
gadget (`getattr`, `.format`, a steering helper) gets a value the old code never built: by choosing among
exclusive branches, by running an accumulation a chosen number of times, or by driving stateful code (a
generator, a property, a helper) in a loop. The slice of a gadget keeps the headers of the blocks its inputs
are defined in for this reason (graph_planner/patch_slice.py); these cases pin it. Written by a reviewer who
tried to relax that rule (2026-11-29: it would have accepted none of the large corpus' refused gold fixes).
"""

import textwrap

D = textwrap.dedent
CASES = []


def case(name, old, new, expect_hole=None):
    CASES.append((name, D(old).lstrip(), D(new).lstrip()))


# A1: two independent choices among unchanged pieces; the old conditions are exclusive (a.k == 1 vs
# a.k == 2), so the old code never builds "__class__"; the patch makes both true.
A1_OLD = """
def f(o, a):
    if a.k == 1:
        p = a.under
    else:
        p = a.x
    if a.k == 2:
        q = a.word
    else:
        q = a.y
    name = p + p + q + p + p
    return getattr(o, name)
"""
case(
    "A1 getattr: combine two exclusive choices",
    A1_OLD,
    A1_OLD.replace("a.k == 1", "a.k > 0").replace("a.k == 2", "a.k > 0"),
)
case(
    "A1f .format: the same with a template",
    A1_OLD.replace("return getattr(o, name)", "return ('{0.' + name + '}').format(o)"),
    A1_OLD.replace("return getattr(o, name)", "return ('{0.' + name + '}').format(o)")
    .replace("a.k == 1", "a.k > 0")
    .replace("a.k == 2", "a.k > 0"),
)

# A2: a stateful generator advanced a changed number of times (next() is a call: not plain)
A2_OLD = """
def gen(a):
    s = a.under
    while True:
        yield s
        s = s + a.under

def f(o, a, n):
    it = gen(a)
    name = a.x
    while n > 10:
        name = next(it)
        n = n - 1
    return getattr(o, name)
"""
case("A2 while + next(generator)", A2_OLD, A2_OLD.replace("while n > 10", "while n > 0"))

# A3: the same through tuple unpacking (iterates the generator without a call)
A3_OLD = A2_OLD.replace("name = next(it)", "name, _ = it")
case("A3 while + unpacking a generator", A3_OLD, A3_OLD.replace("while n > 10", "while n > 0"))

# A4: a choice made anew per iteration, feeding a value built up across iterations
A4_OLD = """
def f(o, a, text):
    s = a.x
    for ch in text:
        if ch == a.never:
            sep = a.under
        else:
            sep = a.empty
        s = s + sep + ch
    return getattr(o, s)
"""
case("A4 per-iteration choice feeding s = s + ...", A4_OLD, A4_OLD.replace("ch == a.never", "ch != a.never"))

# A5: an early break deciding how much is built up
A5_OLD = """
def f(o, a, text):
    s = a.x
    for ch in text:
        if ch == a.stop:
            break
        s += ch
    return getattr(o, s)
"""
case("A5 break decides how long s += ch runs", A5_OLD, A5_OLD.replace("ch == a.stop", "ch != a.stop"))

# A6: a stateful helper of the file called a changed number of times
A6_OLD = """
COUNT = []

def tick(a):
    COUNT.append(a.under)
    return "".join(COUNT)

def f(o, a, n):
    name = a.x
    while n > 10:
        name = tick(a)
        n = n - 1
    return getattr(o, name)
"""
case("A6 while + stateful file helper", A6_OLD, A6_OLD.replace("while n > 10", "while n > 0"))

# A7: an exception as control: a changed raise inside the try chooses the handler's definition
A7_OLD = """
def f(o, a):
    try:
        if a.k > 5:
            raise ValueError
        name = a.x
    except ValueError:
        name = a.under
    return getattr(o, name)
"""
case("A7 changed raise inside a try", A7_OLD, A7_OLD.replace("a.k > 5", "a.k > 0"))

# A8: a sanitiser written as if/else around the definition (a guard that dominates the gadget is already
# no protection under the rule of today: see A8g)
A8_OLD = """
def f(o, key, a):
    if key[:1] == a.under:
        name = a.default
    else:
        name = key
    return getattr(o, name)
"""
case("A8 sanitiser if/else removed (negated)", A8_OLD, A8_OLD.replace("if key[:1] == a.under", "if key[:1] != a.under"))
A8G_OLD = """
def f(o, key, a):
    if key[:1] == a.under:
        return None
    return getattr(o, key)
"""
case(
    "A8g sanitiser guard before the gadget (today's rule)",
    A8G_OLD,
    A8G_OLD.replace("if key[:1] == a.under", "if key[:1] != a.under"),
)

# A9: object behaviour: a property of the file whose value grows per read, read a changed number of times
A9_OLD = """
class Grow:
    def __init__(self, a):
        self.s = a.under
    @property
    def more(self):
        self.s = self.s + self.s
        return self.s

def f(o, a, n):
    g = Grow(a)
    name = a.x
    while n > 10:
        name = g.more
        n = n - 1
    return getattr(o, name)
"""
case("A9 while + stateful property read (plain syntax)", A9_OLD, A9_OLD.replace("while n > 10", "while n > 0"))

# A10: a `for` loop whose body only picks: changed filter (continue) chooses which element is last
A10_OLD = """
def f(o, a, items):
    name = a.x
    for item in items:
        if item[:1] == a.under:
            continue
        name = item
    return getattr(o, name)
"""
case(
    "A10 changed continue filter, pick last",
    A10_OLD,
    A10_OLD.replace("if item[:1] == a.under", "if item[:1] != a.under"),
)

# A11: the per-iteration choice made inside a nested if of a loop that also does a list append
A11_OLD = """
def f(o, a, text):
    parts = []
    for ch in text:
        if ch == a.never:
            c = a.under
        else:
            c = ch
        parts.append(c)
    return getattr(o, a.empty.join(parts))
"""
case("A11 per-iteration choice + parts.append + join", A11_OLD, A11_OLD.replace("ch == a.never", "ch != a.never"))

# A12: helper steering: the choice is in a caller of a file helper whose parameter reaches getattr
A12_OLD = """
def pick(o, name):
    return getattr(o, name)

def f(o, a):
    if a.k == 1:
        n = a.x
    else:
        n = a.y
    return pick(o, n)
"""
case("A12 choice feeding a steering helper", A12_OLD, A12_OLD.replace("a.k == 1", "a.k != 1"))

# A13: a while loop whose condition is changed, body only plain picks from two pieces (no build-up)
A13_OLD = """
def f(o, a, n):
    name = a.x
    while n > 10:
        name = a.y
        n = n - 1
    return getattr(o, name)
"""
case("A13 while changed, body only re-picks a value", A13_OLD, A13_OLD.replace("while n > 10", "while n > 0"))

# A14: walrus in a changed while condition binding the name
A14_OLD = """
def f(o, a, it):
    name = a.x
    while (nxt := a.step(it)) != a.stop:
        name = nxt
    return getattr(o, name)
"""
case("A14 walrus in a changed while header", A14_OLD, A14_OLD.replace("!= a.stop", "== a.stop"))

# A15 (PLANACT_PURE_ARGS): a local named like a pure builtin is no builtin
A15_OLD = """
def f(o, a, n):
    parts = [a.x]
    len = parts.append
    while n > 10:
        len(a.under)
        n = n - 1
    return getattr(o, a.empty.join(parts))
"""
case(
    "A15 local `len` = parts.append, called a changed number of times",
    A15_OLD,
    A15_OLD.replace("while n > 10", "while n > 0"),
)

# A16 (PLANACT_PURE_ARGS): a module-level def named like a pure builtin (the prototype does not check this)
A16_OLD = """
def len(x):
    x.append(x[0])
    return 0

def f(o, a, n):
    parts = [a.under]
    while n > 10:
        len(parts)
        n = n - 1
    return getattr(o, a.empty.join(parts))
"""
case(
    "A16 module-level `def len` that appends, called a changed number of times",
    A16_OLD,
    A16_OLD.replace("while n > 10", "while n > 0"),
)

# Accepted by today's check too: a guard removed before the gadget only lets the old values through more often;
# the runtime name guard judges the value getattr gets.
ACCEPTED_TODAY = {"A8g"}
