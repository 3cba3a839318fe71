"""A digest of the repository's module state, taken in the test process after each judged test.

The boot script loads this file from the host's per-run copy (kept out of sys.modules, as the name guard is)
and calls `state_digest(root)` once; the function it returns maps every global of every module whose file is
under `root` (the package, its tests, conftest.py) to a short hash of what that global reaches. The host
compares each test's map with the same test's map in the gold fix's run (graph_planner/state_digest.py): a
patch that leaves the bug in place and widens a tolerance or swaps a comparison through module state changes
a value here, wherever the route to it went.

A plain dict global of at most SPLIT entries (and its plain dict items, SPLIT_DEPTH levels) is digested entry by
entry (`module\tglobal\tkey`), so an unstable entry leaves its siblings compared; the test's fixture values are
digested too (`<fixture>\tname`). Lambdas are told apart by their code.

What is digested, and why a correct fix leaves the same digest: data, not code. Scalars by value; dicts, lists,
tuples, sets, deques and their subclasses by content (dict entries and set members sorted by their hashes, since
hash order varies from process to process); functions, classes and modules by qualified name, never their code
(a fix changes code); for the repository's own functions also their mutable defaults, closure cells and
attribute dict; for its own classes their class attributes; for instances of its own classes their `__dict__`
and slots. A library's instance counts by its class's name only (a logger's level cache, a lock, a compiled
pattern: state a fix may touch differently and a test's comparison does not read), except the standard
library's data containers (array, bytearray, a ContextVar's value, UserDict, UserList, UserString, ChainMap,
argparse's Namespace), digested by content. Immutable defaults are
skipped (a fix may change a literal default). No code of the package runs: no `__eq__`, `__hash__`,
`__repr__`, `__iter__` or property of any object is called, only the builtin types' own C methods.
Depth (DEPTH) and nodes per global (BUDGET) are bounded, deterministically: what lies beyond is not seen.
A function's defaults are read once (reading `__defaults__` is an audit event, and the guard's hook judges
every one: read per test, they cost funcy's suite ~10 CPU seconds); what they hold is digested every time.
"""

import sys

try:  # C: code under test cannot rebind what this module took before it ran
    from _blake2 import blake2b
except ImportError:  # a Python built without it
    from hashlib import blake2b

DEPTH = 8  # levels below a module global: a profile dict in a registry dict in a class attribute is 3
BUDGET = 5000  # nodes per module global; a node past it counts as "..." (a 65,000-entry table is one node, below)
FAST = 32  # a longer list or tuple of plain strings is hashed in one C call (text-unidecode's tables)
SPLIT = 64  # a plain dict global of at most this many entries is digested item by item (review 8, M2) ...
SPLIT_DEPTH = 2  # ... and its plain dict items of that size too, to this many levels


def state_digest(root):
    """A function returning {"module\\tglobal": hash} for every module under `root` (see the docstring)."""
    prefix = root.rstrip("/") + "/"
    module_type, function_type = type(sys), type(state_digest)
    # builtins and their bound methods (`TABLE.get`), method wrappers and descriptors: C callables
    builtin_types = (type(len), type(object().__str__), type(str.join), type(dict.__dict__["fromkeys"]))
    bound_type = type(_Probe().method)
    getset_type, member_type = type(type.__dict__["__dict__"]), type(_Probe.__dict__["slot"])
    type_dict = type.__dict__["__dict__"].__get__  # a class's own dict, never a metaclass's override
    qualname = type.__dict__["__qualname__"].__get__
    module_dict = module_type.__dict__["__dict__"].__get__
    sorted_, len_, id_, list_, issubclass_ = sorted, len, id, list, issubclass
    dict_items, join = dict.items, "\x00".join
    from argparse import Namespace
    from array import array
    from collections import ChainMap, UserDict, UserList, UserString, defaultdict, deque
    from contextvars import ContextVar
    from functools import partial
    from types import SimpleNamespace

    # a scalar is its own digest (tag and value): only containers are hashed, so a table of numbers costs a join.
    # Ints in hex: decimal conversion refuses more than 4,300 digits, and a digest that raises must not be the
    # patch's to cause. Strings with the working copy's path in it: each sandbox slot has its own copy, and a
    # test module's `FIXTURES = os.path.join(os.path.dirname(__file__), ...)` is the same state in every one.
    root_ = root.rstrip("/")
    scalars = {
        int: lambda x: "i" + int.__format__(x, "x"),
        float: lambda x: "f" + float.__repr__(x),
        complex: lambda x: "c" + complex.__repr__(x),
        bool: lambda x: "b" + int.__repr__(x),
        str: lambda x: "s" + str.replace(str.__str__(x), root_, "<copy>"),
        bytes: lambda x: "y" + bytes.hex(x),
        type(None): lambda x: "None",
        type(Ellipsis): lambda x: "...",
    }
    immutable = tuple(scalars)
    # library classes that are nothing but data in their instance dict: digested like the repository's own
    plain = (UserDict, UserList, UserString, ChainMap, Namespace)
    frozen = {}  # id -> (object, digest, nodes): tuples and frozensets of scalars only, which cannot change

    def h(*parts):
        return blake2b(join(parts).encode("utf-8", "surrogatepass"), digest_size=8).hexdigest()

    # function or plain class -> its name. Keyed by the object: both hash by identity in C (no metaclass of
    # the package's), and `id()` is an audit event the guard's hook would see at every node
    names = {}

    def name_of(obj):  # a class's or function's qualified name, read from its own dict or C attributes
        t = type(obj)
        if t is function_type or t is type:
            hit = names.get(obj)
            if hit is None:
                hit = names[obj] = named(obj)
            return hit
        return named(obj)

    def named(obj):
        if issubclass_(type(obj), type):
            mod = type_dict(obj).get("__module__")
            return f"{mod if type(mod) is str else '?'}.{qualname(obj)}", mod
        mod = getattr(obj, "__module__", None)  # functions and builtins: C attributes
        qual = getattr(obj, "__qualname__", None)
        mod = mod if type(mod) is str else "?"
        qual = qual if type(qual) is str else "?"
        if type(obj) is function_type and qual[-8:] == "<lambda>":
            # every lambda of a module has one name: swapping two in a dispatch table left the same digest (review
            # 8, M12). Its code tells them apart; not its line (a fix above it moves it), nor a named function's
            # code (a fix changes it). Read once per function (names caches it): `__code__` is an audit event
            code = obj.__code__
            consts = [scalars[type(c)](c) if type(c) in scalars else type(c).__name__ for c in code.co_consts]
            qual += "#" + h(bytes.hex(code.co_code), *consts, *code.co_names)
        return f"{mod}.{qual}", mod

    scanned = [-1, {}, {}]  # len(sys.modules) when scanned, the copy's modules then (name -> module, -> dict)

    def modules():  # the copy's modules, scanned again only when sys.modules changed
        count, mods, own = scanned
        if count == len_(sys.modules) and all(sys.modules.get(n) is m for n, m in mods.items()):
            return own
        mods, own = {}, {}
        for name, module in list_(sys.modules.items()):
            if type(name) is str and issubclass_(type(module), module_type):
                d = module_dict(module)
                file = d.get("__file__")
                if type(file) is str and file.startswith(prefix) and "/site-packages/" not in file[len(prefix) :]:
                    mods[name], own[name] = module, d
        scanned[:] = [len_(sys.modules), mods, own]
        return own

    def digest_all(fixtures=None):
        """{key: hash} of the copy's module state, and of `fixtures` ({name: value}: the test's fixture values,
        which a module-scoped fixture keeps from test to test and no module global may reach)."""
        own = modules()
        out, pass_ = {}, _Pass(own)
        for mod in sorted_(own):
            d = own[mod]
            for key in sorted_(k for k in list_(d) if type(k) is str):
                value = d.get(key)
                if (key[:2] == "__" and key[-2:] == "__") or issubclass_(type(value), module_type):
                    continue  # module machinery, and submodules (a lazy import binds one on its parent)
                split(out, f"{mod}\t{key}", value, 0, pass_)
        if type(fixtures) is dict:
            for key in sorted_(k for k in list_(fixtures) if type(k) is str):
                split(out, f"<fixture>\t{key}", fixtures.get(key), 0, pass_)
        return out

    def split(out, key, value, level, p):
        # a small plain dict item by item: a time stamp or a pid in one entry, unstable between the gold fix's two
        # runs, then leaves only its own key uncompared, not its siblings' (review 8, M2)
        if type(value) is dict and level < SPLIT_DEPTH and len_(value) <= SPLIT:
            keys = []
            for k, v in list_(dict_items(value)):
                p.budget = BUDGET
                kd = node(k, 0, p)
                keys.append(kd)
                split(out, f"{key}\t{kd}", v, level + 1, p)
            out[key] = h("keys", *sorted_(keys))
            return
        p.budget = BUDGET
        out[key] = node(value, 0, p)

    def still(x):  # a tuple or frozenset of scalars and such tuples: (digest, nodes), or None
        t = type(x)
        if t is not tuple and t is not frozenset:
            return None
        i = id_(x)
        hit = frozen.get(i)
        if hit is not None:
            return hit[1], hit[2]
        parts, nodes = [], 1
        for v in x:
            scalar = scalars.get(type(v))
            if scalar is not None:
                parts.append(scalar(v))
                continue
            inner_ = still(v)
            if inner_ is None:
                return None
            parts.append(inner_[0])
            nodes += inner_[1]
        d = h("tuple" if t is tuple else "set", *(parts if t is tuple else sorted_(parts)))
        frozen[i] = (x, d, nodes)  # the object kept: its id is never another's
        return d, nodes

    def node(x, depth, p):
        t = type(x)
        scalar = scalars.get(t)
        if scalar is not None:
            return scalar(x)
        # fast paths, no bookkeeping: a library's function or class, a function with no data of its own
        if t is function_type:
            name, mod = name_of(x)
            if mod not in p.own or not (x.__closure__ or x.__dict__ or any(defaults(x))):
                return "fn " + name
        if t is type:
            name, mod = name_of(x)
            if mod not in p.own:
                return "class " + name
        fixed = still(x)
        if fixed is not None:
            p.budget -= fixed[1]
            return fixed[0] if p.budget >= 0 else h("...", "tuple")
        p.budget -= 1
        if p.budget < 0 or depth > DEPTH:
            return h("...", name_of(t)[0])
        i = id_(x)
        seen = p.memo.get(i)
        if seen is not None:
            return seen[1]
        if i in p.stack:
            return h("cycle", name_of(t)[0])
        p.stack.add(i)
        try:
            d = inner(x, t, depth + 1, p)
        except Exception as e:  # a structure this cannot read the same way twice counts by its class
            d = h("!", name_of(t)[0], type(e).__name__)
        p.stack.discard(i)
        p.memo[i] = (x, d)  # the object kept: its id stays unique for the pass
        return d

    def items(pairs, depth, p):
        return sorted_(node(k, depth, p) + ":" + node(v, depth, p) for k, v in pairs)

    def seq(values, depth, p):
        if len_(values) > FAST:
            try:
                return [h("strs", join(values))]  # TypeError unless every item is a str: then one by one
            except TypeError:
                pass
        return [node(v, depth, p) for v in values]

    mutable = {}  # function -> (its mutable defaults, its mutable keyword defaults), read once (module docstring)

    def defaults(x):
        hit = mutable.get(x)
        if hit is None:
            kw = x.__kwdefaults__ or {}
            values = [v for v in x.__defaults__ or () if not issubclass_(type(v), immutable)]
            hit = mutable[x] = (values, [(k, v) for k, v in kw.items() if not issubclass_(type(v), immutable)])
        return hit

    def function(x, depth, p):  # the repository's own: its mutable defaults, closure cells and attributes
        name, mod = name_of(x)
        if mod not in p.own:
            return "fn " + name
        values, kw = defaults(x)
        cells, attrs = x.__closure__, x.__dict__
        parts = [node(v, depth, p) for v in values]
        parts += items(kw, depth, p)
        for c in cells or ():
            try:
                parts.append(node(c.cell_contents, depth, p))
            except ValueError:  # an empty cell
                parts.append("empty")
        parts += items(list_(dict_items(attrs)), depth, p)
        return h("fn", name, *parts)

    def inner(x, t, depth, p):
        tname, tmod = name_of(t)
        if t is function_type:
            return function(x, depth, p)
        if issubclass_(t, dict):
            extra = [node(x.default_factory, depth, p)] if issubclass_(t, defaultdict) else []
            return h("dict", tname, *items(list_(dict_items(x)), depth, p), *extra)
        if issubclass_(t, (list, tuple, deque)):  # copied by the base type's C code: no __iter__ of a subclass
            if issubclass_(t, list):
                values = list.copy(x)
            else:
                values = tuple.__getitem__(x, slice(None)) if t is not deque else list_(deque.__iter__(x))
            return h("seq", tname, *seq(values, depth, p))
        if issubclass_(t, (set, frozenset)):
            values = list_(set.copy(x) if issubclass_(t, set) else frozenset.copy(x))
            return h("set", tname, *sorted_(node(v, depth, p) for v in values))
        if issubclass_(t, immutable):  # an int, str... subclass: its value, read by the base type's C method
            base = next(b for b in t.__mro__ if b in scalars)
            return h("v", tname, scalars[base](x))
        if issubclass_(t, module_type):
            return h("module", str(module_dict(x).get("__name__")))
        if t is bound_type:
            return h("method", node(x.__func__, depth, p), node(x.__self__, depth, p))
        if t in builtin_types:
            owner = getattr(x, "__self__", None)
            own_ = owner is None or issubclass_(type(owner), module_type)
            return h("builtin", name_of(x)[0], *([] if own_ else [node(owner, depth, p)]))
        if issubclass_(t, type):
            name, mod = name_of(x)
            if mod not in p.own:
                return "class " + name
            pairs = [(k, v) for k, v in list_(type_dict(x).items()) if not (k[:2] == "__" and k[-2:] == "__")]
            return h("class", name, *items(pairs, depth, p))
        if t is staticmethod or t is classmethod:
            return h(t.__name__, node(x.__func__, depth, p))
        if t is property:
            return h("property", *(node(f, depth, p) for f in (x.fget, x.fset, x.fdel)))
        if t is partial:
            return h("partial", *(node(v, depth, p) for v in (x.func, x.args, x.keywords)))
        if issubclass_(t, array):  # review 8 (M4): the stdlib's data containers, by content too
            return h("array", tname, array.__dict__["typecode"].__get__(x), array.tobytes(x).hex())
        if issubclass_(t, bytearray):
            return h("bytes", tname, bytearray.hex(x))
        if t is ContextVar:  # (M6) its value in this context; unset and without a default: "!" LookupError
            return h("contextvar", node(ContextVar.get(x), depth, p))
        if t is SimpleNamespace:
            return h(tname, *items(list_(dict_items(vars(x))), depth, p))
        if tmod not in p.own and not issubclass_(t, plain):
            return "object " + tname  # a library's instance: its class, not its inner state (module docstring)
        parts = []
        for klass in t.__mro__:  # the instance's dict (a real one: no property named __dict__) and its slots
            kd = type_dict(klass)
            desc = kd.get("__dict__")
            if desc is not None and not parts and type(desc) is getset_type:
                parts += items(list_(dict_items(desc.__get__(x, t))), depth, p)
            slots = kd.get("__slots__")
            for slot in [slots] if type(slots) is str else list_(slots or ()):
                member = kd.get(slot) if type(slot) is str else None
                if type(member) is member_type:
                    try:
                        parts.append(slot + ":" + node(member.__get__(x, t), depth, p))
                    except AttributeError:  # an unset slot
                        parts.append(slot + ":unset")
        if issubclass_(t, BaseException):
            parts.append(node(BaseException.__dict__["args"].__get__(x), depth, p))
        return h("object", tname, *parts)

    return digest_all


class _Pass:
    """One digest's bookkeeping: the repository's module names, objects digested, the walk's stack, budget."""

    def __init__(self, own):
        self.own, self.memo, self.stack, self.budget = own, {}, set(), BUDGET


class _Probe:
    """A class whose attributes give the interpreter's method and slot types."""

    __slots__ = ("slot",)

    def method(self):
        """A method, for the bound-method type."""
