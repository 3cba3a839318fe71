"""The call jail's rewrite: the target function's code replaced by a trampoline wherever the module's code
defines it, and the import hook that loads the target file that way (in the zygote and in the test process).

Standard library only, like graph_planner/jail.py, which loads a per-run copy of this file beside it.
"""

from __future__ import annotations

import importlib.machinery
import os
import sys
import types

JAIL_NAME = "__planact_jail__"  # the module global the trampoline calls
CO_GENERATORS = 0x20 | 0x80 | 0x100 | 0x200  # generator, coroutine, iterable coroutine, async generator


class JailFault(Exception):
    """The jail could not give a verdict on a call (never an outcome a test may see)."""


# --- the rewrite: the target function's code replaced wherever the module's code defines it ---------------


def _find(code: types.CodeType, qualname: str, first: int, last: int, path=()):
    """(path of const indexes, code object) of the function `qualname` defined between lines first..last."""
    for i, c in enumerate(code.co_consts):
        if isinstance(c, types.CodeType):
            if c.co_qualname == qualname and first <= c.co_firstlineno <= last:
                return (*path, i), c
            found = _find(c, qualname, first, last, (*path, i))
            if found:
                return found
    return None


def _replace(code: types.CodeType, path: tuple, new: types.CodeType) -> types.CodeType:
    consts = list(code.co_consts)
    consts[path[0]] = new if len(path) == 1 else _replace(consts[path[0]], path[1:], new)
    return code.replace(co_consts=tuple(consts))


def trampoline(original: types.CodeType, doc: str | None = None) -> types.CodeType:
    """Code with `original`'s signature and free variables whose body hands the bound arguments to
    `__planact_jail__(args, kwargs)` (parameter names and counts as inspect.signature reads them); `doc`: its
    docstring (the unpatched function's, never the patch's: a docstring can be a doctest pytest runs)."""
    if original.co_flags & CO_GENERATORS:
        raise JailFault(f"{original.co_qualname} is a generator or coroutine function: it cannot be jailed")
    names, pos, npos = original.co_varnames, original.co_argcount, original.co_posonlyargcount
    kwonly = names[pos : pos + original.co_kwonlyargcount]
    at = pos + len(kwonly)
    star = names[at] if original.co_flags & 0x04 else None
    dstar = names[at + (star is not None)] if original.co_flags & 0x08 else None
    params = list(names[:npos]) + (["/"] if npos else []) + list(names[npos:pos])
    params += [f"*{star}"] if star else (["*"] if kwonly else [])
    params += list(kwonly) + ([f"**{dstar}"] if dstar else [])
    args = "(" + "".join(f"{n}, " for n in names[:pos]) + (f"*{star}," if star else "") + ")"
    kwargs = "{" + "".join(f"{n!r}: {n}, " for n in kwonly) + (f"**{dstar}" if dstar else "") + "}"
    free = original.co_freevars
    src = "def _factory():\n" + "".join(f"    {v} = None\n" for v in free)
    src += f"    def _tramp({', '.join(params)}):\n" + (f"        {doc!r}\n" if type(doc) is str else "")
    src += "".join(f"        {v}\n" for v in free)  # makes each a free variable, in the same order
    src += f"        return {JAIL_NAME}({args}, {kwargs})\n    return _tramp\n"
    ns: dict = {}
    exec(compile(src, original.co_filename, "exec", dont_inherit=True), ns)
    code = ns["_factory"]().__code__
    if code.co_freevars != free:
        raise JailFault(f"cannot mirror the free variables of {original.co_qualname}: {free}")
    return code.replace(
        co_name=original.co_name, co_qualname=original.co_qualname, co_firstlineno=original.co_firstlineno
    )


def compile_split(path: str, qualname: str, first: int, last: int, source: bytes | None = None, doc=None):
    """(module code with the target replaced by its trampoline, the trampoline, the patched target's code);
    `source`: the patched file's text when the file on disk no longer holds it; `doc`: the trampoline's."""
    if source is None:
        with open(path, "rb") as fh:
            source = fh.read()
    module = compile(source, path, "exec", dont_inherit=True)
    found = _find(module, qualname, first, last)
    if found is None:
        raise JailFault(f"no function {qualname} on lines {first}-{last} of {path}")
    where, patched = found
    tramp = trampoline(patched, doc)
    return _replace(module, where, tramp), tramp, patched


def docstring(base: str | bytes, path: str, qualname: str, first: int, last: int) -> str | None:
    """The target's docstring in the unpatched text `base` (None when it has none or is not found there)."""
    found = _find(compile(base, path, "exec", dont_inherit=True), qualname, first, last)
    consts = found[1].co_consts if found else ()
    return consts[0] if consts and type(consts[0]) is str else None  # (3.11: a docstring is the first constant)


class Loader(importlib.machinery.SourceFileLoader):
    """Loads the target file as its split code, `__planact_jail__` bound first (no bytecode cache)."""

    def __init__(self, fullname, path, hook):
        super().__init__(fullname, path)
        self.hook = hook

    def get_code(self, fullname):
        code, tramp, patched = compile_split(self.path, *self.hook.target, self.hook.source, self.hook.doc)
        # only the zygote keeps the patched code (for its children); the test process drops it here
        self.hook.codes.append((tramp, patched if self.hook.keep else None))
        return code

    def exec_module(self, module):
        module.__dict__[JAIL_NAME] = self.hook.call
        super().exec_module(module)


class ImportHook:
    """A meta-path finder that hands the target file, under any module name, to `Loader`."""

    def __init__(self, file: str, qualname: str, first: int, last: int, call, keep=False, source=None, doc=None):
        self.file, self.target, self.call, self.keep = os.path.realpath(file), (qualname, first, last), call, keep
        self.source, self.doc = source, doc
        self.codes: list[tuple[types.CodeType, types.CodeType]] = []

    def find_spec(self, name, path, target=None):
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is not None and spec.origin and os.path.realpath(spec.origin) == self.file:
            spec.loader = Loader(name, spec.origin, self)
            return spec
        return None  # any other module: the finders after this one, as without the jail

    def install(self) -> None:
        """First on sys.meta_path (the boot script installs it before pytest imports anything)."""
        sys.meta_path.insert(0, self)
