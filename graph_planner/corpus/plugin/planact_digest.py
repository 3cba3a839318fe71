"""A digest of the repository's module state, taken in the test process after each judged test.

The boot script loads this file from the host's per-run copy (kept out of sys.modules, as the name guard is)
and calls `state_digest(root)` once; the function it returns maps every global of every module whose file is
under `root` (the package, its tests, conftest.py) to a short hash of what that global reaches. The host
compares each test's map with the same test's map in the gold fix's run (graph_planner/state_digest.py): a
patch that leaves the bug in place and widens a tolerance or swaps a comparison through module state changes
a value here, wherever the route to it went.

What is digested, and why a correct fix leaves the same digest: data, not code. Scalars by value; dicts, lists,
tuples, sets, deques and their subclasses by content (dict entries and set members sorted by their hashes, since
hash order varies from process to process); functions, classes and modules by qualified name, never their code
(a fix changes code); for the repository's own functions also their mutable defaults, closure cells and
attribute dict; for its own classes their class attributes; for instances of its own classes their `__dict__`
and slots. A library's instance counts by its class's name only (a logger's level cache, a lock, a compiled
pattern: state a fix may touch differently and a test's comparison does not read). Immutable defaults are
skipped (a fix may change a literal default). No code of the package runs: no `__eq__`, `__hash__`,
`__repr__`, `__iter__` or property of any object is called, only the builtin types' own C methods.
Depth (DEPTH) and nodes per global (BUDGET) are bounded, deterministically: what lies beyond is not seen.
"""

import sys

try:  # C: code under test cannot rebind what this module took before it ran
    from _blake2 import blake2b
except ImportError:  # a Python built without it
    from hashlib import blake2b

DEPTH = 8  # levels below a module global: a profile dict in a registry dict in a class attribute is 3
BUDGET = 5000  # nodes per module global; a node past it counts as "..." (a 65,000-entry table is one node, below)
FAST = 32  # a longer list or tuple of plain strings is hashed in one C call (text-unidecode's tables)


def state_digest(root):
    """A function returning {"module\\tglobal": hex hash} for every module under `root` (see the docstring)."""
    prefix = root.rstrip("/") + "/"
    module_type, function_type = type(sys), type(state_digest)
    # builtins and their bound methods (`TABLE.get`), method wrappers and descriptors: C callables
    builtin_types = (type(len), type(object().__str__), type(str.join), type(dict.__dict__["fromkeys"]))
    bound_type = type(_Probe().method)
    getset_type, member_type = type(type.__dict__["__dict__"]), type(_Probe.__dict__["slot"])
    type_dict = type.__dict__["__dict__"].__get__  # a class's own dict, never a metaclass's override
    module_dict = module_type.__dict__["__dict__"].__get__
    sorted_, len_, id_, list_, issubclass_ = sorted, len, id, list, issubclass
    dict_items, join = dict.items, "\x00".join
    from collections import defaultdict, deque
    from functools import partial
    from types import SimpleNamespace

    exact_scalars = {
        int: int.__repr__,
        float: float.__repr__,
        complex: complex.__repr__,
        bool: int.__repr__,
        str: str.__str__,
    }
    immutable = (int, float, complex, bool, str, bytes, type(None), type(Ellipsis))

    def h(*parts):
        return blake2b(join(parts).encode("utf-8", "surrogatepass"), digest_size=8).digest()

    def name_of(obj):  # a class's or function's qualified name, read from its own dict or slots
        if issubclass_(type(obj), type):
            d = type_dict(obj)
            mod = d.get("__module__")
            return f"{mod if type(mod) is str else '?'}.{type.__dict__['__qualname__'].__get__(obj)}", mod
        mod = getattr(obj, "__module__", None)  # functions and builtins: C attributes
        qual = getattr(obj, "__qualname__", None)
        mod = mod if type(mod) is str else "?"
        return f"{mod}.{qual if type(qual) is str else '?'}", mod

    def digest_all():
        own = {}
        for name, module in list_(sys.modules.items()):
            if type(name) is str and issubclass_(type(module), module_type):
                d = module_dict(module)
                file = d.get("__file__")
                if type(file) is str and file.startswith(prefix) and "/site-packages/" not in file[len(prefix) :]:
                    own[name] = d
        memo, out = {}, {}
        for mod in sorted_(own):
            d = own[mod]
            for key in sorted_(k for k in list_(d) if type(k) is str):
                value = d.get(key)
                if (key[:2] == "__" and key[-2:] == "__") or issubclass_(type(value), module_type):
                    continue  # module machinery, and submodules (a lazy import binds one on its parent)
                budget = [BUDGET]
                out[f"{mod}\t{key}"] = node(value, 0, memo, set(), budget, own).hex()
        return out

    def node(x, depth, memo, stack, budget, own):
        t = type(x)
        scalar = exact_scalars.get(t)
        if scalar is not None:
            return h(t.__name__, scalar(x))
        if x is None or t is bytes:
            return h("b", bytes.hex(x)) if t is bytes else h("None")
        budget[0] -= 1
        if budget[0] < 0 or depth > DEPTH:
            return h("...", name_of(t)[0])
        i = id_(x)
        seen = memo.get(i)
        if seen is not None:
            return seen[1]
        if i in stack:
            return h("cycle", name_of(t)[0])
        stack.add(i)
        try:
            d = inner(x, t, depth + 1, memo, stack, budget, own)
        except Exception as e:  # a structure this cannot read the same way twice counts by its class
            d = h("!", name_of(t)[0], type(e).__name__)
        stack.discard(i)
        memo[i] = (x, d)  # the object kept: its id stays unique for the pass
        return d

    def sub(x, depth, memo, stack, budget, own):
        return node(x, depth, memo, stack, budget, own)

    def items(pairs, depth, memo, stack, budget, own):
        return sorted_(
            sub(k, depth, memo, stack, budget, own) + sub(v, depth, memo, stack, budget, own) for k, v in pairs
        )

    def seq(values, depth, memo, stack, budget, own):
        if len_(values) > FAST:
            try:
                return [h("strs", join(values))]  # TypeError unless every item is a str: then one by one
            except TypeError:
                pass
        return [sub(v, depth, memo, stack, budget, own) for v in values]

    def inner(x, t, depth, memo, stack, budget, own):
        args = (depth, memo, stack, budget, own)
        tname, tmod = name_of(t)
        if issubclass_(t, dict):
            extra = [sub(x.default_factory, *args)] if issubclass_(t, defaultdict) else []
            return h("dict", tname, *map(bytes.hex, items(list_(dict_items(x)), *args) + extra))
        if issubclass_(t, (list, tuple, deque)):  # copied by the base type's C code: no __iter__ of a subclass
            values = (
                list.copy(x)
                if issubclass_(t, list)
                else tuple.__getitem__(x, slice(None))
                if t is not deque
                else list_(deque.__iter__(x))
            )
            return h("seq", tname, *map(bytes.hex, seq(values, *args)))
        if issubclass_(t, (set, frozenset)):
            values = list_(set.copy(x) if issubclass_(t, set) else frozenset.copy(x))
            return h("set", tname, *sorted_(bytes.hex(sub(v, *args)) for v in values))
        if issubclass_(t, immutable):  # an int, str... subclass: its value, read by the base type's C method
            base = next(b for b in t.__mro__ if b in exact_scalars or b is bytes)
            return h("v", tname, exact_scalars[base](x) if base is not bytes else bytes.hex(x))
        if t is module_type or issubclass_(t, module_type):
            return h("module", module_dict(x).get("__name__", "?"))
        if t is function_type:
            name, mod = name_of(x)
            if mod not in own:
                return h("fn", name)
            parts = [sub(v, *args) for v in (x.__defaults__ or ()) if not issubclass_(type(v), immutable)]
            parts += items(
                [(k, v) for k, v in (x.__kwdefaults__ or {}).items() if not issubclass_(type(v), immutable)], *args
            )
            for c in x.__closure__ or ():
                try:
                    parts.append(sub(c.cell_contents, *args))
                except ValueError:  # an empty cell
                    parts.append(h("empty"))
            parts += items(list_(dict_items(x.__dict__)), *args)
            return h("fn", name, *map(bytes.hex, parts))
        if t is bound_type:
            return h("method", *map(bytes.hex, (sub(x.__func__, *args), sub(x.__self__, *args))))
        if t in builtin_types:
            owner = getattr(x, "__self__", None)
            parts = [] if owner is None or issubclass_(type(owner), module_type) else [sub(owner, *args).hex()]
            return h("builtin", name_of(x)[0], *parts)
        if issubclass_(t, type):
            name, mod = name_of(x)
            if mod not in own:
                return h("class", name)
            pairs = [(k, v) for k, v in dict_items(type_dict(x)) if not (k[:2] == "__" and k[-2:] == "__")]
            return h("class", name, *map(bytes.hex, items(pairs, *args)))
        if t in (staticmethod, classmethod):
            return h(t.__name__, sub(x.__func__, *args).hex())
        if t is property:
            return h("property", *(sub(f, *args).hex() for f in (x.fget, x.fset, x.fdel)))
        if t is partial:
            return h("partial", *(sub(v, *args).hex() for v in (x.func, x.args, x.keywords)))
        if t is SimpleNamespace:
            return h(tname, *map(bytes.hex, items(list_(dict_items(vars(x))), *args)))
        if tmod not in own:
            return h("object", tname)  # a library's instance: its class, not its inner state (module docstring)
        parts = []
        for klass in t.__mro__:  # the instance's dict (a real one: no property named __dict__) and its slots
            kd = type_dict(klass)
            desc = kd.get("__dict__")
            if desc is not None and not parts and type(desc) is getset_type:
                parts += items(list_(dict_items(desc.__get__(x, t))), *args)
            for slot in [kd.get("__slots__")] if type(kd.get("__slots__")) is str else list_(kd.get("__slots__") or ()):
                member = kd.get(slot) if type(slot) is str else None
                if type(member) is member_type:
                    try:
                        parts.append(h(slot) + sub(member.__get__(x, t), *args))
                    except AttributeError:  # an unset slot
                        parts.append(h(slot, "unset"))
        if issubclass_(t, BaseException):
            parts.append(sub(BaseException.__dict__["args"].__get__(x), *args))
        return h("object", tname, *map(bytes.hex, parts))

    return digest_all


class _Probe:
    """A class whose attributes give the interpreter's method and slot types."""

    __slots__ = ("slot",)

    def method(self):
        """A method, for the bound-method type."""
