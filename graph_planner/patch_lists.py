"""The patch check's lists (graph_planner/patch_check.py states the rules): which builtins are safe,
which modules are capabilities, which chains through them only compute, which standard modules a chain
may resolve through (`resolves_pure`), and which callables are gadgets."""

from __future__ import annotations

import abc
import builtins
import enum
import functools
import importlib
import types

# Builtins a body may read: values, containers, iteration, arithmetic, exceptions. Not type, getattr,
# setattr, delattr, hasattr, vars, dir, globals, locals, object, eval, exec, compile, open, __import__,
# breakpoint, input, memoryview, id: those only where the body had them. `super` stays: zero-argument
# super() reads the method's own `__class__` cell and first argument, so it reaches only the methods
# `self` already has, and dunders on it are judged like any other. property / staticmethod /
# classmethod stay: they wrap a callable the body already holds and expose it only through dunders.
# `__name__` / `__doc__` are the module's name and docstring.
DECORATORS = frozenset({"property", "staticmethod", "classmethod"})
SAFE_BUILTINS = (
    frozenset(
        "abs all any ascii bin bool bytearray bytes callable chr complex dict divmod enumerate filter float "
        "format frozenset hash hex int isinstance issubclass iter len list map max min next oct ord pow print "
        "range repr reversed round set slice sorted str sum super tuple zip NotImplemented Ellipsis True "
        "False None __name__ __doc__".split()
    )
    | DECORATORS
    | {n for n, v in vars(builtins).items() if isinstance(v, type) and issubclass(v, BaseException)}
)

# Modules whose names give a body power over processes, files, the import system, the interpreter or the
# test runner; a name imported from one may be read bare only where the function already read it.
CAPABILITY_MODULES = frozenset(
    "os sys subprocess builtins importlib ctypes signal gc inspect atexit threading _thread multiprocessing "
    "concurrent asyncio socket select selectors pytest _pytest unittest shutil pathlib io tempfile glob "
    "fnmatch types marshal pickle shelve code codeop runpy traceback linecache site sysconfig pkgutil "
    "zipimport zipfile tarfile mmap resource faulthandler tracemalloc weakref fcntl pty posix nt dis ast "
    "copyreg __main__ http urllib codecs fileinput platform getpass webbrowser pdb bdb cProfile profile "
    "trace timeit doctest logging pydoc imp gzip bz2 lzma sqlite3 dbm configparser filecmp netrc ssl "
    "socketserver smtplib ftplib imaplib poplib telnetlib xmlrpc wsgiref ensurepip venv distutils "
    "setuptools pkg_resources _io _imp _frozen_importlib _frozen_importlib_external _posixsubprocess "
    "_ctypes _pickle _socket _ssl _signal _weakref".split()
)
# Chains through capability modules that only compute (no files, processes, frames or modules): a body
# may use one where the unpatched file already did.
PURE_CHAINS = frozenset(
    [f"os.path.{f}" for f in "join basename dirname splitext split normpath normcase isabs commonprefix sep".split()]
    + [f"os.{c}" for c in "sep altsep pathsep linesep curdir pardir extsep name".split()]
    + [f"sys.{c}" for c in "version_info version maxsize platform byteorder float_info maxunicode".split()]
    + [f"logging.{f}" for f in "getLogger debug info warning error exception critical log".split()]
    + [f"logging.{c}" for c in "DEBUG INFO WARNING ERROR CRITICAL NOTSET".split()]
    + ["io.StringIO", "io.BytesIO", "threading.Lock", "threading.RLock", "types.MappingProxyType"]
    + ["types.SimpleNamespace", "pathlib.PurePath", "pathlib.PurePosixPath", "pathlib.PureWindowsPath"]
)
# Standard modules that only compute: a chain through one that the file never used may still be read
# when it resolves to a plain function, class or value (see resolves_pure).
RESOLVABLE = frozenset(
    "re datetime collections functools itertools math cmath string json decimal fractions operator enum "
    "typing textwrap numbers copy heapq bisect array struct calendar statistics unicodedata base64 binascii "
    "hashlib hmac html keyword difflib reprlib dataclasses abc contextlib ipaddress zlib time random "
    "pprint warnings".split()
)


# Calls and objects of pure modules that change state the whole process (the tests included) shares: the
# thread's decimal context rounds every Decimal the tests compute (`getcontext().prec = 1` made 4.01 == 4),
# the random generator's state, warning filters, the locale.
STATEFUL = (
    "decimal.getcontext",
    "decimal.setcontext",
    "decimal.localcontext",
    "decimal.DefaultContext",
    "decimal.BasicContext",
    "decimal.ExtendedContext",
    "random.seed",
    "random.setstate",
    "warnings.simplefilter",
    "warnings.filterwarnings",
    "warnings.resetwarnings",
    "warnings.filters",
    "locale.setlocale",
    # decorators that rewrite the class they are handed (a class of a library, handed anew by a body)
    "dataclasses.dataclass",
    "typing.no_type_check",
    "typing.runtime_checkable",
    "typing.final",
    "functools.total_ordering",
    "abc.update_abstractmethods",
    "copy.dispatch_table",
    "copyreg.dispatch_table",
)


@functools.lru_cache(maxsize=4096)
def resolves_pure(module: str, parts: tuple[str, ...]) -> bool:
    """`module.parts...` (module in RESOLVABLE), resolved on this interpreter (the one that runs the
    tests) through public names and modules of the same package only, is neither a module, nor a
    metaclass (it builds classes), nor a builtin a body may not read."""
    if module.split(".")[0] not in RESOLVABLE or any(p.startswith("_") for p in parts):
        return False
    try:
        obj = importlib.import_module(module)
    except Exception:  # noqa: BLE001 - not importable here: not judged pure
        return False
    for p in parts:
        obj = getattr(obj, p, _MISSING)
        if obj is _MISSING or (
            isinstance(obj, types.ModuleType) and obj.__name__.split(".")[0] != module.split(".")[0]
        ):
            return False
    if any(".".join((module, *parts)).startswith(s) for s in STATEFUL):
        return False
    unsafe = [v for k, v in vars(builtins).items() if k not in SAFE_BUILTINS]
    return not (
        isinstance(obj, types.ModuleType)
        or (isinstance(obj, type) and issubclass(obj, type))
        or getattr(obj, "__origin__", None) is type
        or any(obj is v for v in unsafe)
        # an Enum without members (enum.ReprEnum) builds a class from a namespace through its functional API
        or (isinstance(obj, enum.EnumMeta) and not obj.__members__)
        # ABCMeta.register makes isinstance answer yes for any class, everywhere in the process
        or getattr(obj, "__func__", None) is abc.ABCMeta.register
    )


_MISSING = object()
UNRESOLVED = object()  # what `resolved` gives for a chain it will not resolve


def resolved(module: str, parts: tuple[str, ...]) -> object:
    """`module.parts...` on this interpreter when `resolves_pure` allows it, else UNRESOLVED."""
    if not resolves_pure(module, parts):
        return UNRESOLVED
    obj = importlib.import_module(module)
    for p in parts:
        obj = getattr(obj, p)
    return obj


# Gadgets: callables that turn a string into an attribute, code or a module, or a namespace into a class.
# A builtin gadget is read only where the function already read it; any gadget is called only with
# literal arguments, or with arguments whose every statement in the function is unchanged (a slice).
GADGET_BUILTINS = frozenset("getattr setattr delattr hasattr vars type eval exec compile __import__".split())
NAME_ARGUMENT = frozenset("getattr setattr delattr hasattr".split())  # the gadget input is the name, arg 1
# Which arguments of a gadget are names (positions, keyword names); any other gadget: every argument.
NAME_INPUTS = {
    **{g: ((1,), set()) for g in NAME_ARGUMENT},
    "vformat": ((0,), {"format_string"}),
    "get_field": ((0,), {"field_name"}),
    "get_value": ((0,), {"key"}),
    "methodcaller": ((0,), set()),
    "update_wrapper": ((2, 3), {"assigned", "updated"}),
    "wraps": ((1, 2), {"assigned", "updated"}),
}
TEMPLATES = frozenset({"format", "format_map"})  # str.format: the template (or a Formatter's first argument)
GADGET_ATTRS = frozenset(
    "format format_map vformat get_field get_value attrgetter methodcaller update_wrapper wraps "
    "make_dataclass import_module locate resolve_name ABCMeta EnumMeta EnumType Enum IntEnum "
    "Flag IntFlag StrEnum ReprEnum global_enum register Type new_class getattr_static _create_ get_type_hints "
    "ForwardRef NamedTuple TypedDict".split()
)
