"""The boot script's name guard (planact_boot.py loads it from the host's per-run copy, before pytest starts).

getattr, setattr, delattr (as the package modules' own builtins), `__import__` of a capability module,
importlib.import_module and logging.config's dotted-name resolvers are judged by the name they get: a risky
one must have been called so, by the same caller, in the clean run (`allowed`, the record's "<names>").
No audit event fires for these, which is why they are wrapped. The boot script runs this file's code
without adding it to sys.modules, so that code under test finds it no more easily than the boot script.
"""

import sys


def name_guard(root, cfg, allowed, record, void, quiet):
    """Wrap the string-to-attribute and string-to-module builtins; returns the keys it records and the
    function that puts its finder first again. `void(key)` reports a judged name and ends the process."""
    import builtins
    import functools
    import importlib
    import operator
    import re
    import string

    seen = set()
    allowed = frozenset(allowed) if allowed is not None else None
    word = re.compile(cfg["words"]).match
    # the first part of every frame or code word (f_back, gi_frame...): the regex runs only then
    stems = frozenset(w.split("_")[0] for w in ("f_", "gi_", "cr_", "ag_", "tb_", "co_", "func_", "im_", "cell_"))
    capability = frozenset(cfg["capability"])
    own_modules = frozenset(cfg["modules"])  # the host's canary test modules of this run
    getframe, module_type, exact = sys._getframe, type(sys), str.__add__
    code_like = (type(name_guard), type(len), type)  # functions, builtins, classes: their __module__ is data
    getattr_, setattr_, delattr_ = builtins.getattr, builtins.setattr, builtins.delattr
    import_module_ = importlib.import_module
    scalars = (int, float, complex, bool, str, bytes, type(None))
    # the string-to-attribute, string-to-code and class-building gadgets: handing one out is handing out power
    builtin_gadgets = "eval exec compile open __import__ vars globals locals dir type object breakpoint input"
    others = (getattr_, setattr_, delattr_, import_module_, operator.attrgetter, operator.methodcaller)
    others += (string.Formatter, functools.wraps, functools.partial)
    gadgets = {id(getattr_(builtins, n)) for n in builtin_gadgets.split()} | {id(g) for g in others}
    prefix = root.rstrip("/") + "/"
    busy = []

    def judge(gadget, name, obj=None, walk=False):
        if busy:  # reporting a violation (json, hmac) may call the wrapped functions itself
            return
        frame = getframe(2)  # the caller of the wrapper
        code = frame.f_code
        # `walk`: judged only with the copy's code (the package, its tests) on the stack; what the test runner
        # imports on its own names nothing a patch chose, and would fill the record with its every call.
        while walk and frame is not None and not frame.f_code.co_filename.startswith(prefix):
            frame = frame.f_back
        if frame is None:
            return
        path = code.co_filename
        if path.startswith(prefix):
            path = path[len(prefix) :]  # the copy's files: the same key in every slot
        # the object's class too: `__dict__` read where the clean code read an instance's gives no module's
        key = f"{path}|{code.co_qualname}|{gadget}|{name}|{type(obj).__name__}"
        if record:
            seen.add(key)
        elif key not in allowed:
            busy.append(1)
            void(key)

    def plain(name):  # a str subclass as the plain string it holds: its methods could lie to the checks
        return exact("", name) if type(name) is not str and isinstance(name, str) else name

    def risky(name):  # a private or dunder name, or a frame or code word
        return name[:1] == "_" or name == "mro" or (name.partition("_")[0] in stems and word(name) is not None)

    def capable(value, obj):
        """A module, a non-scalar read from a module (`sys.modules`), a gadget, or a capability module's
        function or class."""
        from_module = isinstance(obj, module_type) and type(value) not in scalars
        if isinstance(value, module_type) or id(value) in gadgets or from_module:
            return True
        if type(value) in code_like or isinstance(value, type):
            home = getattr_(value, "__module__", None)
            return type(home) is str and home.partition(".")[0] in capability
        return False

    def getattr(obj, name, *default):
        name = plain(name)
        if type(name) is str and risky(name):
            judge("getattr", name, obj)
            return getattr_(obj, name, *default)
        value = getattr_(obj, name, *default)
        if capable(value, obj):
            judge("getattr", name, obj)
        return value

    def setattr(obj, name, value):
        name = plain(name)
        if type(name) is str and (risky(name) or isinstance(obj, module_type) or capable(value, None)):
            judge("setattr", name, obj)
        return setattr_(obj, name, value)

    def delattr(obj, name):
        name = plain(name)
        if type(name) is str and (risky(name) or isinstance(obj, module_type)):
            judge("delattr", name, obj)
        return delattr_(obj, name)

    def import_module(name, package=None):
        name = plain(name)
        if name not in own_modules:
            judge("import_module", f"{package}:{name}" if name[:1] == "." else name, walk=True)
        return import_module_(name, package)

    quiet.add(judge.__code__)  # its sys._getframe is the guard's own, not the code under test's
    wrapped = {"getattr": getattr, "setattr": setattr, "delattr": delattr}
    originals = ((getattr, getattr_), (setattr, setattr_), (delattr, delattr_), (import_module, import_module_))
    for fn, original in originals:
        # what pickle and inspect read to find a function by name (no __wrapped__: it would lead back)
        fn.__module__, fn.__qualname__, fn.__doc__ = original.__module__, original.__qualname__, original.__doc__
    importlib.import_module = import_module
    # logging.config calls whatever a config's dotted names resolve to (`()`, `class`, `ext://`): a config in
    # module data a changed function filled is a call-anything gadget (a review's forges, 2026-11-30)
    import logging.config as logconf

    resolve_, method_ = logconf._resolve, logconf.BaseConfigurator.resolve

    def _resolve(name):
        judge("resolve", plain(name), walk=True)
        return resolve_(name)

    def resolve(self, s):
        judge("resolve", plain(s), walk=True)
        return method_(self, s)

    logconf._resolve, logconf.BaseConfigurator.resolve = _resolve, resolve

    hooked = []  # loaders whose exec_module is wrapped (kept alive: identity is the test)
    live = builtins.__dict__

    class _Builtins(dict):
        """The wrapped names; every other builtin read through to the live ones (`mock.patch("builtins.print")`
        must reach the package: a copy failed 20 of 24 slugify gold fixes); `[]`, `get` and `in` alike."""

        def __missing__(self, name):
            return live[name]

        def get(self, name, default=None):
            return dict.get(self, name, live.get(name, default))

        def __contains__(self, name):
            return dict.__contains__(self, name) or name in live

    def __import__(name, globals=None, locals=None, fromlist=(), level=0):
        # read with the dict API (no `__missing__`): forwards to the live one, which a test may patch; an
        # absolute import of a capability module (a helper's `__import__(name)` handed "sys") is judged,
        # not module code's import statements (a patch changes no module code)
        name = plain(name)
        if not level and type(name) is str and name.partition(".")[0] in capability:
            if getframe(1).f_code.co_name != "<module>":
                judge("__import__", name)
        return live["__import__"](name, globals, locals, fromlist, level)

    __import__.__module__, __import__.__qualname__ = "builtins", "__import__"
    quiet.add(__import__.__code__)
    own = _Builtins(wrapped, __import__=__import__)

    def own_builtins(loader):  # wrap `loader.exec_module` once: each module of the copy gets its own builtins
        run = loader.exec_module

        def exec_module(module):
            origin = getattr_(getattr_(module, "__spec__", None), "origin", None)
            if type(origin) is str and origin.startswith(prefix):
                module.__dict__["__builtins__"] = own
            run(module)

        loader.exec_module = exec_module
        hooked.append(loader)

    class _Finder:
        """Gives each module of the copy its own builtins before its code runs, whichever later finder finds
        it (the plugin keeps this one in front of pytest's rewriter). Not globals: tests see those (toolz);
        the runner and libraries keep theirs (wrapping them cost 40% of a suite)."""

        @classmethod
        def find_spec(cls, name, path=None, target=None):
            finders = sys.meta_path
            for finder in finders[finders.index(cls) + 1 :] if cls in finders else ():
                find = getattr_(finder, "find_spec", None)
                spec = find(name, path, target) if find is not None else None
                if spec is not None:
                    break
            else:
                return None
            loader = spec.loader
            ours = (spec.origin or "").startswith(prefix) and loader is not None and not isinstance(loader, type)
            if ours and not any(h is loader for h in hooked):
                own_builtins(loader)
            return spec

    def front():  # put the finder first again (pytest inserts its assertion rewriter at the front)
        if _Finder in sys.meta_path:
            sys.meta_path.remove(_Finder)
        sys.meta_path.insert(0, _Finder)

    front()
    return seen, front
