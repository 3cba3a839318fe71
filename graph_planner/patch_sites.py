"""The patch check's gadget sites: where a changed function reads a gadget or an impure helper, and whether its
inputs are vetted or come from statements the old function already had (graph_planner/patch_policy.py's `Judge`
applies them beside its rules on names and words)."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator

from graph_planner.patch_facts import (
    INTROSPECTION,
    Facts,
    horizon,
    loops_around,
    names_outside,
    slice_units,
)
from graph_planner.patch_forms import class_clone
from graph_planner.patch_lists import GADGET_ATTRS, GADGET_BUILTINS, NAME_ARGUMENT, NAME_INPUTS, TEMPLATES
from graph_planner.patch_state import type_reaches

_BY_NAME = frozenset({"attrgetter", "methodcaller"})  # they take an attribute's name as a string


class GadgetSites:
    """`Judge`'s judgement of gadget call sites (it holds `rules`, `chains`, `callables`, `tainted`, `state`)."""

    def sites(self, facts: Facts) -> Iterator[tuple[str, ast.AST, int, bool, bool]]:
        """(identity, node, unit, kept required, inputs checked) of every gadget or impure helper the code
        reads: a kept-required one only where the old function read it, a checked one only with vetted
        inputs or inputs from unchanged statements."""
        rules = self.rules
        for name, form, node, i in facts.name_refs:
            if form in ("base", "decorator"):
                continue  # fixed by the skeleton: a class's bases, a decorator applied to its def once
            kind, info = rules.kind(name, facts)
            harmless = form in ("type-safe", "literal-name") or (form == "type-clone" and rules.clone_safe)
            if form == "type-safe" and type_reaches(rules, facts, node) != []:
                harmless = False  # asked about, but by an object whose comparison methods may keep the class
            if kind == "builtin" and name in GADGET_BUILTINS and not harmless:
                yield name, node, i, True, True
            elif kind == "defined" and (name in rules.impure_names or name in rules.type_returners):
                yield name, node, i, True, name in rules.gadget_names
            elif kind == "alias" and any(o[1] in GADGET_ATTRS for o in info):
                yield name, node, i, False, True
            elif kind == "unknown" and name in rules.bindings and rules.gadget_unknown(name):
                yield name, node, i, True, True
            elif kind == "unknown" and name not in rules.bindings and rules.star:
                yield name, node, i, True, True  # what a star import bound: it may be any gadget
            elif kind == "param" and info == "gadget":
                yield name, node, i, True, True
        for attr, node, i in facts.attr_refs:
            if attr == "__class__":
                # x.__class__ is type(x): type itself when x is a class (`self.__class__.__class__(...)`);
                # harmless where only asked about, or called fresh or on data like type(x)
                outer = facts.parent(node)
                fresh = isinstance(outer, ast.Call) and outer.func is node and not outer.args + outer.keywords
                clone = rules.clone_safe and class_clone(facts, node.value, node)
                if not (fresh or clone or type_reaches(rules, facts, node) == []):
                    yield ".__class__", node, i, True, True
            elif attr in GADGET_ATTRS:
                yield "." + attr, node, i, False, True
            elif attr in rules.impure_attrs or attr in rules.type_returners:
                yield "." + attr, node, i, True, attr in rules.gadget_attrs
        yield from self._named_by_string(facts)

    def _named_by_string(self, facts: Facts) -> Iterator[tuple[str, ast.AST, int, bool, bool]]:
        """`getattr(x, "m")`, `operator.attrgetter("m")`, `methodcaller("m", ...)` with a literal name reach
        attribute m as `x.m` does: an impure method or one that hands out a class is a site there too."""
        rules = self.rules
        refs = [(n, node, i) for n, form, node, i in facts.name_refs if form == "literal-name" or n in _BY_NAME]
        refs += [(a, node, i) for a, node, i in facts.attr_refs if a in _BY_NAME]
        for _, node, i in refs:
            call = facts.call_of(node)
            for a in call.args if call is not None else []:
                text = a.value if isinstance(a, ast.Constant) and isinstance(a.value, str) else ""
                for part in text.split(".") if text else []:
                    if part in GADGET_ATTRS:  # methodcaller("format", x)(template) is template.format(x)
                        yield "." + part, node, i, True, True
                    elif part in rules.impure_attrs or part in rules.type_returners:
                        yield "." + part, node, i, True, part in rules.gadget_attrs

    def inputs(self, facts: Facts, ident: str, node: ast.AST) -> list[ast.AST] | None:
        """The arguments a gadget call's result depends on (None: the gadget escapes as a value)."""
        if isinstance(node, ast.Name) and facts.chain_top(node) is not node:
            return []  # only an attribute of it is read (`Helper.method`): that attribute is judged itself
        call = facts.call_of(node)
        if call is None:
            return None
        by = node.attr if isinstance(node, ast.Attribute) else getattr(node, "id", "")
        if ident.startswith(".") and ident[1:] != by and (by in _BY_NAME or by in NAME_ARGUMENT):
            # a method named by a literal string (`methodcaller("format", x)(t)`, `getattr(t, "format")(x)`):
            # its receiver and arguments are those of the result's call, so the whole statement counts
            return None
        args = [*call.args, *(k.value for k in call.keywords)]
        if ident == "type" and len(call.args) == 1 and not call.keywords and not isinstance(call.args[0], ast.Starred):
            # x only decides which class comes out: where only comparisons with plain operands (or questions)
            # consume it, it reaches no code that could keep it; otherwise x and the operands it meets count
            receivers = type_reaches(self.rules, facts, node)
            if receivers is not None:
                return [*call.args, *receivers] if receivers else []
        callees = self.rules.callees(ident)
        if callees and ident[1:] in GADGET_ATTRS:
            # a method of the file named like a library gadget (`Field().format(obj, name)`): either may
            # run, so every argument and the receiver count
            receiver = [node.value] if isinstance(node, ast.Attribute) else []
            return args + receiver
        if callees:  # a helper of the file: only the arguments that reach its steering parameters
            steered = self.rules.steered_args(callees, call, method=isinstance(node, ast.Attribute))
            if steered is not None:
                return steered
        receiver = node.value if isinstance(node, ast.Attribute) else None
        if isinstance(receiver, ast.Name) and self.rules.kind(receiver.id, facts)[0] in ("alias", "builtin", "defined"):
            receiver = None  # `operator.attrgetter`, `str.format`: the module or class is not data
        name = ident.lstrip(".")
        if name in TEMPLATES:  # a str's template names the fields, the arguments are only objects
            if receiver is not None and self.vetted(receiver, facts, None):
                return [receiver]
            return [*([receiver] if receiver is not None else []), *call.args[:1]]
        if name in NAME_INPUTS and not any(isinstance(a, ast.Starred) for a in call.args):
            positions, keywords = NAME_INPUTS[name]
            if not any(k.arg is None for k in call.keywords):
                return [a for i, a in enumerate(call.args) if i in positions] + [
                    k.value for k in call.keywords if k.arg in keywords
                ]
        return args + ([receiver] if receiver is not None else [])

    def inputs_vetted(self, facts: Facts, old: Facts | None, ident: str, node: ast.AST) -> bool:
        """Every input of the gadget at `node` is vetted (none when it escapes as a value)."""
        inputs = self.inputs(facts, ident, node)
        return inputs is not None and all(self.vetted(e, facts, old) for e in inputs)

    def vetted(self, e: ast.AST, facts: Facts, old: Facts | None) -> bool:
        """A gadget input that cannot carry a computed name: a constant (a string without dunder or
        introspection words, unless the old function had that string), containers of them, a literal
        module constant, a local only ever assigned such constants."""
        if isinstance(e, ast.Constant):
            text = e.value.decode("latin-1") if isinstance(e.value, bytes) else e.value
            if not isinstance(text, str):
                return True
            clean = "__" not in text and not any(INTROSPECTION.match(t) for t in re.findall(r"\w+", text))
            return clean or (old is not None and text in old.strings)
        if isinstance(e, ast.UnaryOp):
            return self.vetted(e.operand, facts, old)
        if isinstance(e, ast.BinOp) and isinstance(e.op, ast.Mod) and isinstance(e.left, ast.Constant):
            # "{0:>%ds}" % width: numeric conversions insert digits, never a field name
            conversions = re.findall(r"%(?:\([^)]*\))?[#0 +-]*(?:\*|\d+)?(?:\.(?:\*|\d+))?[hlL]?(.)", str(e.left.value))
            return set(conversions) <= set("diouxXeEfFgG%") and self.vetted(e.left, facts, old)
        if isinstance(e, (ast.Tuple, ast.List, ast.Set)):
            return all(self.vetted(x, facts, old) for x in e.elts)
        if isinstance(e, ast.Dict):
            return all(x is not None and self.vetted(x, facts, old) for x in e.keys + e.values)
        if isinstance(e, ast.Name):
            if e.id in facts.constants:  # a local only ever assigned immutable vetted values
                values = facts.constants[e.id]
                return all(
                    not isinstance(v, (ast.Name, ast.List, ast.Set, ast.Dict)) and self.vetted(v, facts, old)
                    for v in values
                )
            kind, value = self.rules.kind(e.id, facts)
            return kind == "literal" and self.vetted(value, facts, old)
        return False

    def site_ok(self, facts: Facts, old: Facts, node: ast.AST, ident: str, i: int) -> bool:
        """A checked site with computed inputs in a changed function: the old function made a call of the
        same gadget with the same computed inputs; the rest of its statement mentions nothing of the
        inputs' data-flow slice; the slice is the same statements as in the old function; and it
        mentions no tainted function."""
        inputs = self.inputs(facts, ident, node)
        unit = facts.units[i]
        computed = list(unit.parts) if inputs is None else [e for e in inputs if not self.vetted(e, facts, old)]
        key = sorted(ast.dump(e) for e in computed)
        seeds_old = set()
        for ident2, node2, j, _, checked in self.sites(old):
            inputs2 = self.inputs(old, ident2, node2)
            computed2 = (
                list(old.units[j].parts) if inputs2 is None else [e for e in inputs2 if not self.vetted(e, old, facts)]
            )
            if ident2 == ident and checked and sorted(ast.dump(e) for e in computed2) == key:
                seeds_old.add(j)
        if not seeds_old:
            return False  # not a call the old function made with these inputs
        # all the old calls together, or one of them alone: two calls with the same inputs (a second
        # import_module(name) after a first) each have their own slice, which the union would not match
        candidates = [seeds_old] + ([{j} for j in sorted(seeds_old)] if len(seeds_old) > 1 else [])
        outliving = self.outliving(facts, ident, node)
        return any(self.same_slice(facts, old, node, i, computed, seeds, outliving) for seeds in candidates)

    def same_slice(
        self, facts: Facts, old: Facts, node: ast.AST, i: int, computed: list, seeds_old: set, outliving: bool
    ) -> bool:
        """The computed inputs of the gadget at `node` (unit i) are fed by the same statements, in the
        same order and blocks, as the old calls `seeds_old`, none of them mentioning a tainted function."""
        unit = facts.units[i]
        names = {n.id for e in computed for n in ast.walk(e) if isinstance(n, ast.Name)}
        unknown = {n for n in self.rules.bindings if self.rules.kind(n, facts)[0] == "unknown"}
        keep = facts.locals | old.locals | unknown  # data flows through locals and module state
        limit_new = horizon(facts, i, node)
        limit_old = max(horizon(old, j) for j in seeds_old) if limit_new < len(facts.units) else len(old.units)
        around_new = loops_around(facts, i)
        around_old = set.intersection(*(loops_around(old, j) for j in seeds_old))
        while True:
            new_units, new_names = slice_units(facts, names, {i}, keep, limit_new, around_new, outliving)
            old_units, old_names = slice_units(old, names, seeds_old, keep, limit_old, around_old, outliving)
            if new_names | old_names == names:
                break
            names = new_names | old_names
        # the same statements in the same order and blocks: reordering unchanged statements builds other values
        if [(facts.units[k].path, facts.units[k].key) for k in sorted(new_units)] != [
            (old.units[k].path, old.units[k].key) for k in sorted(old_units)
        ]:
            return False
        same_statement = len(seeds_old) == 1 and all(
            (old.units[j].path, old.units[j].key) == (unit.path, unit.key) for j in seeds_old
        )
        rest_binds = bool(names_outside(unit, computed) & names)
        if rest_binds and not same_statement:
            return False  # the rest of its own statement could bind or change an input (unless it is unchanged)
        mentions = {n for k in new_units for n in facts.units[k].names | facts.units[k].attrs}
        if rest_binds:  # ... and then what it calls must be unchanged too: `[g(names), getattr(o, names[0])]`
            mentions |= unit.names | unit.attrs
        mentions |= {getattr(n, "id", None) or getattr(n, "attr", None) for e in computed for n in ast.walk(e)}
        return not mentions & self.tainted and not (outliving and mentions & self.state)
