"""Start pytest for planact's host: a signed verdict channel and a runtime guard (run as a script).

The host runs `python -s <a copy of this file under a per-run name>` with a JSON configuration on
stdin, which this script reads whole before anything else is imported; nothing of it is in argv or in
the environment (both stay readable in /proc/self). Then, before pytest imports any repository code:

* the channel: the host's pipe is moved to the descriptor number the host chose for this run; every
  line written to it carries an HMAC (key from stdin, kept only in a closure) over its sequence number
  and text, so lines written by anything but this script are unreadable to the host;
* the guard (PEP 578 audit hook: once added, no Python code removes one): when an audit event fires
  while code of a function the patch changed is on the stack (matched by file and line range), and that
  function did not set off the same event in the clean code's run (`allowed`), the event is reported on
  the channel and the process ends at once with GUARD_EXIT, before the operation happens. In record
  mode (the clean code's run) it only collects which event each watched function on the stack set off.

The plugin's hooks are closures handed to `pytest.main(plugins=...)`: no importable module holds them.
Limits: Python raises no audit event for os.write, os.dup2, reading a function's __globals__,
operator.attrgetter or type(name, bases, dict); a forger that reaches those without an event, or runs
code outside a changed function's frame (a callback it installed), is for the patch check to stop.
"""

import hashlib
import hmac
import json
import os
import sys

GUARD_EXIT = 86
# Events that carry no capability and that ordinary code sets off.
# An import a changed function sets off (a library's lazy `import _strptime`) is not held against it: the
# patch check forbids new imports and every dynamic-import gadget, and the imported module's code is not
# the patch's; what that code does while it is imported is not either (frames of the import system).
BENIGN = frozenset({"builtins.id", "time.sleep", "import"})
# Events held against a changed function only when its own code sets them off (the innermost frame):
# reading `fn.__code__` or `gen.gi_frame` itself, calling `compile` itself. Libraries do both on a
# function's behalf for their own purposes (`inspect.signature`, code generation) and hand out no frame
# or code for it; gold fixes that call them were voided when these were held against the caller.
DIRECT = frozenset({"object.__getattr__", "compile"})
_IMPORT_SYSTEM = frozenset({"<frozen importlib._bootstrap>", "<frozen importlib._bootstrap_external>"})


def _signer(fd, key):
    """A function that writes one signed JSON line to `fd` (or nowhere when fd is None)."""
    state = [0]

    def send(row):
        if fd is None:
            return
        text = json.dumps(row, separators=(",", ":"))
        mac = hmac.new(key, f"{state[0]}:{text}".encode(), hashlib.sha256).hexdigest()[:32]
        state[0] += 1
        data = f"{mac} {text}\n".encode()
        while data:
            data = data[os.write(fd, data) :]

    return send


def _guard(watch, allowed, record, send):
    """Add the audit hook; returns the record (function -> events) it fills in record mode."""
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

    ident = _thread.get_ident

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
            frame = getframe(1)
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
                                send({"guard": event, "in": name})
                                os._exit(GUARD_EXIT)
                            return
                        # the clean run credits every watched function on the stack: a function is
                        # answerable for what it calls, as a changed one is when it is judged
                        seen.setdefault(name, set()).add(event)
                if event in DIRECT:
                    return
                frame = frame.f_back
        finally:
            busy.discard(me)

    if watch:
        sys.addaudithook(hook)
    return seen


class _Plugin:
    """Holds the verdict hooks."""


def _plugin(send, record):
    """The verdict plugin: one signed line per test phase, collection error, the record, the session's end."""

    def pytest_runtest_logreport(report):
        row = {
            "id": report.nodeid,
            "when": report.when,
            "outcome": report.outcome,
            "s": round(float(report.duration), 4),
        }
        if type(report).__name__ == "SubtestReport":
            row["sub"] = 1  # a unittest subTest: pytest reports each under its test's id
        send(row)

    def pytest_collectreport(report):
        if report.failed:
            send({"collect_error": report.nodeid})

    def pytest_sessionfinish(session, exitstatus):
        if record is not None:
            send({"record": {name: sorted(events) for name, events in record.items()}})
        send({"end": int(exitstatus), "failed": session.testsfailed, "collected": session.testscollected})

    plugin = _Plugin()  # hashable by identity, as pytest needs; the hooks are closures, not methods
    plugin.pytest_runtest_logreport = pytest_runtest_logreport
    plugin.pytest_collectreport = pytest_collectreport
    plugin.pytest_sessionfinish = pytest_sessionfinish
    return plugin


def main():
    """Read the host's configuration, set up channel and guard, run pytest."""
    cfg = json.loads(sys.stdin.buffer.read())
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    fd = cfg["channel"]
    if fd is not None and cfg["move_to"] != fd:
        os.dup2(fd, cfg["move_to"], inheritable=False)
        os.close(fd)
        fd = cfg["move_to"]
    send = _signer(fd, bytes.fromhex(cfg.pop("key")))
    record = _guard(cfg["watch"], cfg["allowed"], cfg["record"], send)
    import pytest

    plugin = _plugin(send, record if cfg["record"] else None)
    sys.argv = ["pytest"]
    sys.path[0] = os.getcwd()  # as `python -m pytest` has it (and this script's folder is out of sight)
    sys.exit(pytest.main(cfg["args"], plugins=[plugin]))


if __name__ == "__main__":
    main()
