"""The patch check's rules on names, words and gadgets (graph_planner/patch_check.py states them).

The lists (graph_planner/patch_lists.py) say which builtins are safe, which modules are capabilities,
which chains through them only compute, and which callables are gadgets. `Judge` applies them to a
function's Facts against its old Facts (or, for a helper judged as new code, against nothing), in one
file (`FileRules`, graph_planner/patch_helpers.py) with the unpatched file's chains and the patch's
tainted functions.
"""

from __future__ import annotations

import ast

from graph_planner.patch_facts import (
    Facts,
    _Builder,
    free_names,
)
from graph_planner.patch_forms import result_kept
from graph_planner.patch_lists import (  # noqa: F401 - the lists are part of this module's interface
    CAPABILITY_MODULES,
    DECORATORS,
    GADGET_ATTRS,
    GADGET_BUILTINS,
    NAME_ARGUMENT,
    NAME_INPUTS,
    PURE_CHAINS,
    RESOLVABLE,
    SAFE_BUILTINS,
    TEMPLATES,
    resolves_pure,
)
from graph_planner.patch_own import own_reasons
from graph_planner.patch_sites import GadgetSites
from graph_planner.patch_state import foreign_stores, literal_words, type_handed_over, type_reaches
from graph_planner.patch_writes import write_reasons

_JUDGED_AT_RUN = frozenset({"getattr", "setattr", "delattr"})  # the builtins the boot script wraps


def literal(node: ast.AST | None) -> bool:
    """A value that carries no code: a constant, a negated one, or a tuple of them."""
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        node = node.operand
    if isinstance(node, ast.Tuple):
        return all(literal(e) for e in node.elts)
    return isinstance(node, ast.Constant)


class Judge(GadgetSites):
    """Judges Facts in one file (`rules`: a patch_helpers.FileRules); `chains` / `callables` are the
    unpatched file's, `tainted` the short names of functions whose results a changed function decides."""

    def __init__(self, rules, chains: set[str], callables: set[str], tainted: set[str]):
        self.rules, self.chains, self.callables, self.tainted = rules, chains, callables, tainted
        # module names other changed functions store into or change in place (patch_check sets it for
        # each changed function it judges)
        self.state: frozenset = frozenset()

    def name_ok(self, name: str, form: str, facts: Facts, old: Facts | None) -> bool:
        """Whether a body may read a global or builtin `name` in this form (see patch_check's docstring)."""
        kind, info = self.rules.kind(name, facts)
        if old is not None and (form in old.reads.get(name, ()) or (kind != "alias" and name in old.reads)):
            return True  # the function already read it (an import alias: in this very form)
        if kind == "builtin":
            return (
                name in SAFE_BUILTINS
                or (name == "type" and form == "type-safe")
                or (name == "type" and form == "type-clone" and self.rules.clone_safe)
                or (name == "object" and form == "base")
                or (name in DECORATORS and form == "decorator")
                # getattr(x, "size") hands out no more than x.size: it does not make a helper impure (a
                # changed body still gains no getattr it did not have: the gadget names stay where they were)
                or (form == "literal-name" and old is None)
            )
        if kind in ("defined", "literal"):
            return True  # an impure helper is a site, judged there
        if kind == "alias":
            cap = any(o[0] in CAPABILITY_MODULES for o in info)
            if form in ("call", "base", "decorator"):
                return not cap
            if form.startswith("chain:"):
                chain = form[6:]
                if chain in self.chains:
                    return not cap or chain in PURE_CHAINS
                # a chain the file never used: through a pure standard module, to a plain function,
                # class or value (never a module, a metaclass or a capability builtin)
                rest = tuple(chain.split(".")[1:])
                return not cap and all(resolves_pure(o[3], (o[1],) * bool(o[1]) + rest) for o in info)
            # a bare value: never a module (`import x` binds one; `m = re` would let `m.sys` through): a
            # name the file calls, or one that resolves to a plain function, class or value here
            # (`convert(Decimal)`: what `decimal.Decimal` as a chain already gives)
            return (
                not cap
                and all(o[2] for o in info)
                and (name in self.callables or all(resolves_pure(o[3], (o[1],)) for o in info))
            )
        return False

    def judged_at_run(self, facts: Facts, ident: str, node: ast.AST) -> bool:
        """Whether the name guard judges every name this site receives by value (builtin getattr / setattr /
        delattr, importlib's import_module, a file helper that steers only those)."""
        callees = self.rules.callees(ident)
        if callees:
            return not any(h in self.rules.unjudged for h in callees)
        if ident in _JUDGED_AT_RUN:
            return self.rules.kind(ident, facts)[0] == "builtin"
        origins = []
        if ident == "import_module":
            kind, origins = self.rules.kind(ident, facts)
            origins = origins if kind == "alias" else [None]
        elif ident == ".import_module" and isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            kind, found = self.rules.kind(node.value.id, facts)
            origins = (
                [o and (o[0], "import_module") if not o[1] else None for o in found] if kind == "alias" else [None]
            )
        return bool(origins) and all(o is not None and tuple(o[:2]) == ("importlib", "import_module") for o in origins)

    def outliving(self, facts: Facts, ident: str, node: ast.AST) -> bool:
        """Whether a site's slice must count changes of outliving objects made after it (another call made
        them first): not where the name guard judges the names at run time."""
        callees = self.rules.callees(ident)
        if callees:
            return any(h in self.rules.deep for h in callees)
        call = facts.call_of(node)
        if ident == "type" and call is not None and len(call.args) == 1 and not call.keywords:
            return False  # type(x) reads x's class: no change in place (but `__class__`, a dunder) alters it
        return not self.judged_at_run(facts, ident, node)

    def expr_status(self, expr: ast.AST) -> str:
        """ "pure" when a module-level expression would pass as new code, "gadget" when it reaches a
        gadget, else "capability"."""
        b = _Builder(free_names(expr), set(), class_body=False)
        b.unit("expr", [expr], (), set())
        if any(checked for *_, checked in self.sites(b.f)):
            return "gadget"
        return "capability" if self.violations(None, b.f) else "pure"

    def violations(self, old: Facts | None, new: Facts) -> list[str]:
        """Why `new` (a changed body; a helper as new code when `old` is None) is refused: names, words
        and gadgets. (Structure is patch_check's.)"""
        reasons = []
        bad = sorted(
            {
                f[6:] if f.startswith("chain:") else n
                for n, fs in new.reads.items()
                for f in fs
                if not self.name_ok(n, f, new, old)
            }
        )
        if bad:
            reasons.append(
                f"reads {', '.join(bad)}, which the function did not use (process, file, import-system or "
                "introspection names, module attributes the file never used, or names the file does not define)"
            )
        old_words, old_d = literal_words(self.rules, old) if old else (set(), set())
        new_words, new_d = literal_words(self.rules, new)
        words = sorted((new.words | new_words) - ((old.words | old_words) if old else set()))
        dstrings = sorted((new.dstrings | new_d) - ((old.dstrings | old_d) if old else set()))
        if words or dstrings:
            reasons.append(f"reaches {', '.join(words + [repr(s) for s in dstrings])} (dunder or frame/code words)")
        # a private attribute the file never mentions (`catch_warnings()._module`): stdlib objects keep
        # modules there; the file's own are all mentioned somewhere in it
        private = {a for u in new.units for a in u.attrs if a.startswith("_") and not a.startswith("__")}
        private = sorted(private - {c[1:] for c in self.chains if c.startswith(".")} - (old.mentions if old else set()))
        if private:
            reasons.append(f"reaches {', '.join(private)} (private attributes the file never mentions)")
        if type_handed_over(self.rules, new, old):
            reasons.append(
                "compares a type with a value of the file (a module-level object or class): its `__eq__` is "
                "handed type itself"
            )
        foreign = sorted(foreign_stores(self.rules, new) - (foreign_stores(self.rules, old) if old else set()))
        if foreign:
            reasons.append(
                f"changes {', '.join(foreign)} (an attribute of an imported module or object: other code, the "
                "verdict's reporter included, reads it)"
            )
        reasons += own_reasons(self, old, new)  # rule 9: the file's own module state
        reasons += write_reasons(self.rules, old, new)  # rule 10: writes into objects it did not create
        kept = {ident for ident, *_ in self.sites(old)} if old else set()
        gadgets = set()
        for ident, node, i, need, checked in self.sites(new):
            if need and ident not in kept:
                gadgets.add(f"{ident} (a gadget or impure helper the function did not use)")
            elif (
                old is not None
                and self.rules.may_give_type(ident)
                and not result_kept(new, old, i, ident == "type" and type_reaches(self.rules, new, node) == [])
            ):
                gadgets.add(f"{ident} (its result may be type itself: it must go where it went)")
            elif (
                checked
                and not self.inputs_vetted(new, old, ident, node)
                and (old is None or not self.site_ok(new, old, node, ident, i))
            ):
                gadgets.add(f"{ident} with a computed argument (every statement feeding it must be unchanged)")
        if gadgets:
            reasons.append("uses " + "; ".join(sorted(gadgets)))
        return reasons
