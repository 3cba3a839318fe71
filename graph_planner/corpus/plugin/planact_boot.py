"""Start pytest for planact's host: a signed verdict channel and a runtime guard (run as a script).

The host runs `python -s <a copy of this file under a per-run name>` with a JSON configuration on stdin,
read whole before anything else is imported (nothing of it in argv or the environment). Then, before pytest
imports any repository code (docs/code-repair.md, "Sandbox and verdicts", says what each guarantees):

* the channel: the host's pipe moved to the descriptor it chose; every line carries an HMAC (key from stdin,
  kept only in a closure) over its sequence number and text;
* the guard (PEP 578 audit hook): an event set off while a changed function is on the stack, which that
  function did not set off in the clean run (`allowed`), is reported and the process ends (GUARD_EXIT);
  anywhere else, an event that runs code from data (`PROCESS`: exec, compile, unpickling a class or
  function, a function made or its code replaced) must come from a place (and a compiled text with a
  checksum) that set it off in the clean run: a changed function's planted data is run later by unchanged code;
* the name guard (planact_names.py, copied beside this script under its own per-run name): getattr,
  setattr, delattr (as the package modules' own builtins), `__import__` of a capability module and
  importlib.import_module are judged by the name they get; a risky one must have been called so, by the
  same caller, in the clean run (`allowed["<names>"]`);
* what each test runs (function, `runtest`), the plugins and the hook relay are fixed when collection
  ends: a judged run that swapped one ends with GUARD_EXIT;
* with `digest` set, after each test's call passes, the module state digest (planact_digest.py, per-run copy):
  the globals of the copy's modules that changed since the last digest, on the channel, for the host to compare
  with the gold fix's run of the same test.
Failure reports read and parse each source file once per run (the same text as pytest's own, cheaper).
In record mode (the clean run) the guards only collect. Limits: no audit event for os.write, os.dup2,
reading __globals__, attrgetter or type(n, b, d); other code outside a changed function's frame (a callback
it installed) is for the patch check to stop; the name guard sees only the wrapped functions' calls.
"""

import hmac
import json
import os
import sys

GUARD_EXIT = 86
JAIL_EXIT = 87  # the call jail could not judge a call (graph_planner/jail.py)
# Events that carry no capability and that ordinary code sets off. An import a changed function sets off
# (a lazy `import _strptime`) is not held against it: the patch check forbids new imports and dynamic-import
# gadgets; what the imported module's code does (frames of the import system) is not the patch's either.
BENIGN = frozenset({"builtins.id", "time.sleep", "import"})
# Held against a changed function only when its own code sets them off (reading `fn.__code__` or calling
# `compile` itself): libraries do both for their own purposes (`inspect.signature`); toolz's gold fixes
# were voided when these counted against the caller.
DIRECT = frozenset({"object.__getattr__", "compile"})
NAMES = "<names>"  # the name guard's key in `allowed` and in the record
PROCESS = "<process>"  # the process-wide events' key there
PROCESS_EVENTS = frozenset(  # object.__setattr__: only a function's __code__ counts
    {"exec", "compile", "pickle.find_class", "marshal.loads", "function.__new__", "code.__new__", "object.__setattr__"}
)
AST_PY = os.path.join(os.path.dirname(os.__file__), "ast.py")  # the standard library's, as code objects name it
_IMPORT_SYSTEM = frozenset({"<frozen importlib._bootstrap>", "<frozen importlib._bootstrap_external>"})


def _signer(fd, key):
    """A function that writes one signed JSON line to `fd` (or nowhere when fd is None). It calls only C
    functions taken here, before the package is imported: json.dumps and hmac.new look helpers up in module
    globals (`json.encoder.encode_basestring_ascii`), which code under test could rebind."""
    state = [0]
    encode = json.encoder.c_make_encoder(
        None, _unencodable, json.encoder.c_encode_basestring_ascii, None, ":", ",", False, False, True
    )
    try:
        from _hashlib import hmac_digest as digest  # OpenSSL's one-shot HMAC, in C
    except ImportError:  # a Python built without OpenSSL: hmac.digest, its own C-backed path
        digest = hmac.digest
    write, join = os.write, "".join

    def send(row):
        if fd is None:
            return
        text = join(encode(row, 0))
        mac = digest(key, f"{state[0]}:{text}".encode(), "sha256").hex()[:32]
        state[0] += 1
        data = f"{mac} {text}\n".encode()
        while data:
            data = data[write(fd, data) :]

    return send


def _voider(send):
    """A function that reports why a judged run is void and ends the process with GUARD_EXIT (os._exit taken
    here: code under test could rebind this module's `os`)."""
    exit_ = os._exit

    def void(key, where):
        send({"guard": key, "in": where})
        exit_(GUARD_EXIT)

    return void


def _load(path, name="planact_names"):
    """The module at `path` (a per-run copy of the name guard or the digest), run here, kept out of sys.modules."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _unencodable(value):
    raise TypeError(f"not JSON: {type(value).__name__}")


def _guard(watch, allowed, record, void, quiet):
    """Add the audit hook; returns the record it fills in record mode (events `quiet` code sets off: none)."""
    spans = {}
    for path, first, last, name in watch:
        spans.setdefault(path, []).append((first, last, name))
    allowed = {name: frozenset(events) for name, events in allowed.items()}
    seen = {}
    busy = set()
    armed = []  # set once a watched file's module code runs: before that no watched function exists
    getframe = sys._getframe
    code_type = type(_guard.__code__)
    import _thread
    from zlib import crc32

    ident = _thread.get_ident
    prefix = os.getcwd().rstrip("/") + "/"  # the copy's root: its files are keyed by their relative paths
    processwide = allowed.get(PROCESS, frozenset())

    def process(event, args, frame):  # an event that runs code from data (module docstring), at any place
        if event == "object.__setattr__" and not (len(args) > 1 and args[1] == "__code__"):
            return
        code, detail = frame.f_code, ""
        path, ours = code.co_filename, code.co_filename.startswith(prefix)
        if event == "pickle.find_class":
            detail = f"{args[0]}.{args[1]}"
        elif event == "compile" and (path == AST_PY or type(args[0]) not in (str, bytes)):
            return  # ast.parse (pytest reading a failed test) or a tree (its rewriter): running it is `exec`
        elif event == "compile":  # the source text, in any code: one call site may eval the clean suite's data
            # and a planted string (logging.config.fileConfig's handler args)
            detail = str(crc32(args[0].encode("utf-8", "replace") if type(args[0]) is str else args[0]))
        key = f"{event}|{path[len(prefix) :] if ours else path}|{code.co_qualname}|{detail}"
        if record:
            seen.setdefault(PROCESS, set()).add(key)
        elif key not in processwide:
            void(key, PROCESS)

    def hook(event, args):
        if not armed:
            # A module's code is exec'd when it is imported; until a watched file's is, no frame can be
            # a watched function's, and the stack walks would only cost (pytest's own start-up).
            if event == "exec" and args and type(args[0]) is code_type and args[0].co_filename in spans:
                armed.append(True)
            return
        if event in BENIGN:
            return
        me = ident()
        if me in busy:  # the hook's own sys._getframe
            return
        busy.add(me)
        try:
            frame = first = getframe(1)
            if frame is not None and frame.f_code in quiet:
                return
            wide = first is not None and event in PROCESS_EVENTS
            if wide and record:  # recorded wherever it happens: a judged run may meet it outside the function
                process(event, args, first)
            while frame is not None:
                code = frame.f_code
                if code.co_filename in _IMPORT_SYSTEM:
                    return  # an import in progress: the module's own code, not the patch's, set this off
                lines = spans.get(code.co_filename)
                if lines is not None and code.co_name != "<module>":
                    name = next((n for first, last, n in lines if first <= code.co_firstlineno <= last), None)
                    if name is not None:
                        if not record:
                            if event not in allowed.get(name, ()):
                                void(event, name)
                            return
                        # the clean run credits every watched function on the stack: a function is
                        # answerable for what it calls, as a changed one is when it is judged
                        seen.setdefault(name, set()).add(event)
                if event in DIRECT:
                    break
                frame = frame.f_back
            if wide and not record:  # no changed function on the stack
                process(event, args, first)
        finally:
            busy.discard(me)

    if watch:
        sys.addaudithook(hook)
    return seen


_Plugin = type("_Plugin", (), {"__doc__": "Holds the verdict hooks."})


def _plugin(send, void, record, names, front, digest=None):
    """The verdict plugin: a signed line per test phase, collection error, the record, the session's end, and
    with `digest` (a function: module state key -> hash) what each passed call left changed in module state."""
    import time

    import pytest

    # CPU seconds, as the run's limit counts them (wall time follows the machine's load)
    last, prefix, clock = {}, os.getcwd().rstrip("/") + "/", time.process_time

    def state(item):  # the keys that changed since the last digest (None: gone); the host replays them
        if digest is None or not str(item.path).startswith(prefix):
            return  # a host canary (outside the copy): its changes, if any, go with the next test's digest
        start = clock()
        try:
            now = digest(getattr(item, "funcargs", None))  # fixture values too (review 8, M5)
        except Exception as e:  # noqa: BLE001 - a digest that cannot be taken is itself a state the host compares
            now = {"<digest>": type(e).__name__}  # state_digest.FAILED: the host always compares it
        delta = {k: v for k, v in now.items() if last.get(k) != v}
        delta.update((k, None) for k in last if k not in now)
        last.clear()
        last.update(now)
        send({"digest": item.nodeid, "d": delta, "s": round(clock() - start, 5)})  # its cost, measured

    @pytest.hookimpl(tryfirst=True)
    def pytest_load_initial_conftests(early_config, parser, args):
        front()

    def pytest_runtest_logreport(report):
        row = {"id": report.nodeid, "when": report.when, "outcome": report.outcome}
        row["s"] = round(float(report.duration), 4)
        if type(report).__name__ == "SubtestReport":
            row["sub"] = 1  # a unittest subTest: pytest reports each under its test's id
        if 0 in runs:
            swapped(None, ran())  # a report made by a swapped hook caller is no report
        if report.when == "call" and report.passed and report.nodeid in raised:
            swapped(report.nodeid, "passed though it raised")
        send(row)

    def pytest_collectreport(report):
        if report.failed:
            send({"collect_error": report.nodeid})

    runs = {}  # what each test and the hook relay run, fixed when collected: code that reaches the session

    def ran(item=None):
        if item is None:  # the plugins and the relay's hook callers (`config.hook.pytest_runtest_makereport`)
            return frozenset(map(id, runs[0].get_plugins())), frozenset(
                (k, id(v)) for k, v in vars(runs[0].hook).items()
            )
        return id(getattr(item, "obj", None)), "runtest" in vars(item)

    def swapped(key, now):
        if record is None and runs.get(key) != now:
            void(f"{key}|swapped", NAMES)

    def pytest_collection_finish(session):
        runs[0] = session.config.pluginmanager
        runs.update([(item.nodeid, ran(item)) for item in session.items] + [(None, ran())])

    raised = set()  # tests whose call raised: a report of "passed" for one was made by code that forged it

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_runtest_call(item):
        swapped(item.nodeid, ran(item))
        try:
            result = yield
        except BaseException:
            raised.add(item.nodeid)
            raise
        # at the end of the call, before teardown: a monkeypatch fixture undoes its setattr then
        state(item)
        return result

    def pytest_sessionfinish(session, exitstatus):
        if record is not None:
            send({"record": {**{name: sorted(events) for name, events in record.items()}, NAMES: sorted(names)}})
        send({"end": int(exitstatus), "failed": session.testsfailed, "collected": session.testscollected})

    plugin = _Plugin()  # hashable by identity, as pytest needs; the hooks are closures, not methods
    for name, hook in list(locals().items()):
        if name.startswith("pytest_"):
            setattr(plugin, name, hook)
    return plugin


def _jail(cfg, send):
    """Start the call jail (graph_planner/jail_client.py and jail.py, per-run copies) before anything imports
    the package: the target function becomes a trampoline here and runs only in the zygote's jailed children.
    A call the jail cannot judge is reported and ends the run (JAIL_EXIT): no test may catch it and pass. Once
    the zygote read the patched file, the file on disk holds the base text (a subprocess imports the unpatched
    function)."""
    jail = _load(cfg.pop("lib"), "planact_jail_client")
    exit_ = os._exit

    def fault(why):
        send({"jail": why})
        exit_(JAIL_EXIT)

    client = jail.start(cfg, fault)
    why = client.ready()
    if why:
        fault(f"the jail cannot run: {why}")
    return client


def _share_source_trees():
    """Failure reports read and parse each source file once per run instead of once per entry (same text).

    pytest builds a module's line list for every traceback entry and keeps the syntax trees it parses to
    place a line for one failure report only, so a run with N failing tests reads and parses the failing
    module ~N times: ~60 ms a failure for a 2,700-line module, most of a mutant's run. One cache each for
    the run gives the same report."""
    import inspect

    from _pytest._code import code

    formatter = getattr(code, "ExceptionInfoFormatter", None) or getattr(code, "FormattedExcinfo", None)
    if formatter is None or "astcache" not in getattr(formatter, "__dataclass_fields__", {}):
        return  # another pytest: its own per-report caches stand
    trees, sources, files, init, find = {}, {}, set(), formatter.__init__, code.findsource

    def __init__(self, *args, **kwargs):
        init(self, *args, **kwargs)
        self.astcache = trees

    def findsource(obj):
        try:
            lines, lineno = inspect.findsource(obj)  # linecache's list for the file: one object while cached
        except Exception:
            return find(obj)
        held = sources.get(id(lines))
        if held is None or held[0] is not lines:
            name = inspect.getsourcefile(obj)
            if name in files:
                trees.clear()  # a file read again (changed on disk): its old trees would misplace lines
            files.add(name)
            source = code.Source()
            source.lines, source.raw_lines = [line.rstrip() for line in lines], lines
            held = sources[id(lines)] = (lines, source)
        return held[1], lineno

    formatter.__init__, code.findsource = __init__, findsource


def main():
    """Read the host's configuration, set up channel and guard, run pytest."""
    cfg = json.loads(sys.stdin.buffer.read())
    os.dup2(null := os.open(os.devnull, os.O_RDONLY), 0)
    os.close(null)
    fd = cfg["channel"]
    if fd is not None and cfg["move_to"] != fd:
        os.dup2(fd, cfg["move_to"], inheritable=False)
        os.close(fd)
        fd = cfg["move_to"]
    send = _signer(fd, bytes.fromhex(cfg.pop("key")))
    void = _voider(send)
    sys.path[0] = os.getcwd()  # as `python -m pytest` has it (and this script's folder is out of sight)
    client = _jail(cfg["jail"], send) if cfg.get("jail") else None
    # loaded before the audit hook is added: compiling the guard's own file is no event of the code under test
    names_module = _load(cfg["names"]["file"]) if cfg["watch"] else None
    digest = _load(cfg["digest"], "planact_digest").state_digest(os.getcwd()) if cfg.get("digest") else None
    record = _guard(cfg["watch"], cfg["allowed"], cfg["record"], void, quiet := set())
    names, front = set(), lambda: None
    if names_module is not None:  # a patched run is judged, the clean code's run recorded
        allowed = None if cfg["record"] else cfg["allowed"].get(NAMES, ())
        names, front = names_module.name_guard(
            os.getcwd(), cfg["names"], allowed, cfg["record"], lambda key: void(key, NAMES), quiet
        )
    plugin = _plugin(send, void, record if cfg["record"] else None, names, front, digest)
    import pytest

    _share_source_trees()
    sys.argv = ["pytest"]
    status = pytest.main(cfg["args"], plugins=[plugin])
    if client is not None:
        client.close()  # reaped: the zygote's CPU time (and its children's) counts in the run's
        stray = client.stray()
        if stray:  # before the end line's verdict stands: void it
            client.fault(stray)
    sys.exit(status)


if __name__ == "__main__":
    main()
