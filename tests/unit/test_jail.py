"""The call jail (graph_planner/jail.py, jail_wire.py) attacked from inside the jailed function, with full power:
each attack is blocked by the seccomp filter or scored a fault, beside an honest control that returns its value.

Every case starts a fresh "test process" (a harness script) that hooks a tiny package's import, so the target
function is a trampoline there and its patched body runs only in the zygote's jailed child. A fault is what
ends a real run (the boot script exits); the harness prints it instead.
"""

from __future__ import annotations

import inspect
import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from graph_planner import jail, jail_filter, jail_wire
from graph_planner.corpus import testrun

pytestmark = pytest.mark.skipif(bool(jail_filter.available()), reason="needs seccomp filters on x86_64 Linux")

# The harness's start, shared with test_jail_callbacks.py: a test process that starts the jail and imports the target.
HARNESS_HEAD = """
import inspect, json, os, re, sys
sys.path.insert(0, {lib_dir!r})
sys.path.insert(0, {root!r})
import jail_client
cfg = json.loads(sys.argv[1])
faults = []
client = jail_client.start(cfg, faults.append, {lib!r})
import pkg.core as core
out = {{"zygote": client.proc.pid, "signature": str(inspect.signature(core.target))}}
out["trampoline_consts"] = [repr(c) for c in core.target.__code__.co_consts]
"""
HARNESS = (
    HARNESS_HEAD
    + """try:
    out["value"] = repr(core.target(*cfg["call"]))
except jail_client.JailFault as e:
    out["fault"] = str(e)
except Exception as e:
    out["raised"] = [type(e).__module__ + "." + type(e).__qualname__, repr(e.args)]
out["state"] = core.STATE
out["zygote_alive"] = client.proc.poll() is None
print(json.dumps(out))
"""
)

CORE = """
STATE = {{"n": 0}}
SECRET = {secret!r}


class Error(Exception):
    pass


def target(x, pids=(), *, scale=2):
{body}


def other(x):
    return x
"""


def run_jailed(
    tmp_path: Path, body: str, call: list, call_s: float = 2.0, harness: str = HARNESS, extra: dict | None = None
) -> dict:
    """The harness's report of one call of `target` with `body` (indented by this function); `harness` and
    `extra` (more settings) for a harness of its own (test_jail_callbacks.py)."""
    root = tmp_path / "src"
    (root / "pkg").mkdir(parents=True)
    (root / "pkg" / "__init__.py").write_text("")
    secret = tmp_path / "secret.txt"
    secret.write_text("EXPECTED-VALUE")
    core = CORE.format(secret=str(secret), body=textwrap.indent(textwrap.dedent(body).strip(), "    "))
    (root / "pkg" / "core.py").write_text(core)
    first = core.splitlines().index("def target(x, pids=(), *, scale=2):") + 1
    lib_dir = tmp_path / "lib"
    lib_dir.mkdir()
    for source in testrun._JAIL:  # the files the boot copies
        (lib_dir / source.name).write_bytes(source.read_bytes())
    cfg = {
        "module": "pkg.core",
        "file": str(root / "pkg" / "core.py"),
        "qualname": "target",
        "first": first,
        "last": first + len(body.strip().splitlines()),
        "package": "pkg",
        "call_s": call_s,
        "total_s": 30,
        "max_calls": 100,
        "memory_mb": 256,
        "call": call,
        **(extra or {}),
    }
    script = tmp_path / "harness.py"
    script.write_text(harness.format(lib_dir=str(lib_dir), root=str(root), lib=str(lib_dir / "jail.py")))
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    done = subprocess.run(
        [sys.executable, str(script), json.dumps(cfg)], capture_output=True, text=True, timeout=60, env=env, cwd=root
    )
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    out["stdout"], out["stderr"] = done.stdout, done.stderr
    # the patched body never reached the test process: its trampoline holds no constant of the body
    assert not any("MARK" in c for c in out["trampoline_consts"]), out["trampoline_consts"]
    assert out["signature"] == "(x, pids=(), *, scale=2)"
    assert out["zygote_alive"], out
    assert "EXPECTED-VALUE" not in done.stdout + done.stderr or "value" not in out
    return out


def test_honest_control_returns_its_value(tmp_path):
    out = run_jailed(tmp_path, "'MARK'\nreturn [x * scale, {'k': (1.5, None, b'z', True)}]", [21])
    assert out.get("value") == repr([42, {"k": (1.5, None, b"z", True)}])


def test_honest_exception_comes_back_as_its_class(tmp_path):
    out = run_jailed(tmp_path, "'MARK'\nraise Error('bad', x)", [3])
    assert out["raised"] == ["pkg.core.Error", "('bad', 3)"]
    out = run_jailed(tmp_path / "b", "'MARK'\nraise ValueError(x)", [3])
    assert out["raised"] == ["builtins.ValueError", "(3,)"]


ATTACKS = {
    "open a file (the tests on disk)": "'MARK'\nreturn open(SECRET).read()",
    "list a directory": "'MARK'\nimport os\nreturn os.listdir('/')",
    "read /proc/self/mem": "'MARK'\nreturn open('/proc/self/mem', 'rb').read(10)",
    "read the parent's memory file": "'MARK'\nimport os\nreturn open(f'/proc/{pids[0]}/mem', 'rb').read(10)",
    "fork": "'MARK'\nimport os\nreturn os.fork()",
    "exec a shell": "'MARK'\nimport os\nos.execv('/bin/sh', ['sh', '-c', 'echo pwned'])",
    "kill the test process": "'MARK'\nimport os, signal\nos.kill(pids[0], signal.SIGKILL)\nreturn 1",
    "kill the zygote": "'MARK'\nimport os, signal\nos.kill(pids[1], signal.SIGKILL)\nreturn 1",
    "write to stdout": "'MARK'\nimport os\nos.write(1, b'EXPECTED-VALUE pwned')\nreturn 1",
    "write to stderr": "'MARK'\nimport os\nos.write(2, b'pwned')\nreturn 1",
}


@pytest.mark.parametrize("name", list(ATTACKS))
def test_a_system_call_outside_pure_computation_is_refused(tmp_path, name):
    out = run_jailed(tmp_path, ATTACKS[name], [1, [os.getpid(), 0]])
    assert out["raised"][0] in ("builtins.PermissionError", "builtins.FileNotFoundError"), out
    assert "pwned" not in out["stdout"] + out["stderr"]


def test_raw_system_calls_through_ctypes_fail(tmp_path):
    # socket(AF_INET, SOCK_STREAM), fork, ptrace(PTRACE_ATTACH, parent), process_vm_readv, kill, openat, write,
    # a shared mapping of a descriptor
    body = """
    'MARK'
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    calls = [(41, 2, 1, 0), (57,), (101, 16, pids[0], 0, 0), (310, pids[0], 0, 0, 0, 0, 0), (62, pids[0], 9),
             (257, -100, b'/etc/passwd', 0), (1, 1, b'pwned', 5), (1, 2, b'pwned', 5), (9, 0, 4096, 3, 1, 0, 0)]
    return [(libc.syscall(*c), ctypes.get_errno()) for c in calls]
    """
    out = run_jailed(tmp_path, body, [1, [os.getpid()]])
    assert out["value"] == repr([(-1, 1)] * 9)


def test_fds_are_closed_and_other_writes_refused(tmp_path):
    body = """
    'MARK'
    import os
    done = []
    for fd in range(0, 3):
        try:
            os.write(fd, b'pwned')
            done.append(fd)
        except OSError:
            pass
    return done
    """
    out = run_jailed(tmp_path, body, [1])
    assert out["value"] == "[]" and "pwned" not in out["stdout"] + out["stderr"]


@pytest.mark.parametrize(
    ("name", "body", "why"),
    [
        ("allocate 10 GB", "'MARK'\nreturn len(bytearray(10 << 30))", "MemoryError"),
        ("loop forever", "'MARK'\nwhile True:\n    pass", "ran past"),
        (
            "always-equal object",
            "'MARK'\nclass A:\n    def __eq__(s, o):\n        return True\nreturn A()",
            "not plain",
        ),
        ("a str subclass", "'MARK'\nclass S(str):\n    pass\nreturn S('x')", "not plain"),
        ("huge result", "'MARK'\nreturn 'x' * (64 << 20)", "too large"),
        ("deep result", "'MARK'\nv = []\nfor _ in range(500):\n    v = [v]\nreturn v", "too"),
        ("a cycle", "'MARK'\nv = []\nv.append(v)\nreturn v", "too"),
        ("exit at once", "'MARK'\nimport os\nos._exit(0)", "no answer"),
        (
            "garbage on the result pipe",
            "'MARK'\nimport os\nfor fd in range(3, 40):\n    try:\n        os.write(fd, b'V\\x02\\x00\\x00\\x00\\xff\\xff')\n    except OSError:\n        pass\nos._exit(0)",
            "plain data",
        ),
        ("SystemExit", "'MARK'\nraise SystemExit(0)", "does not pass on"),
        ("KeyboardInterrupt", "'MARK'\nraise KeyboardInterrupt", "does not pass on"),
        ("a class made here", "'MARK'\nclass E(Exception):\n    pass\nraise E(1)", "does not pass on"),
        ("an exception carrying an object", "'MARK'\nraise ValueError(object())", "not plain"),
        ("a generator", "'MARK'\nreturn (i for i in range(3))", "not plain"),
    ],
)
def test_resource_and_value_attacks_are_faults(tmp_path, name, body, why):
    out = run_jailed(tmp_path, body, [1], call_s=2.0)
    assert why in out.get("fault", ""), out


def test_module_state_written_in_the_child_stays_there(tmp_path):
    out = run_jailed(tmp_path, "'MARK'\nSTATE['n'] = 99\nglobals()['STATE'] = {'n': 7}\nreturn STATE['n']", [1])
    assert out["value"] == "7" and out["state"] == {"n": 0}


def test_codec_round_trips_plain_data_and_refuses_the_rest():
    value = [
        None,
        True,
        False,
        0,
        -(10**50),
        1.5,
        float("inf"),
        "é\ud800",
        b"\x00",
        (1, (2,)),
        {1: {"a"}},
        frozenset({3}),
    ]
    assert jail_wire.decode(jail_wire.encode(value)) == value
    for bad in [
        b"",
        b"Q",
        b"N\x00",
        b"I\x02\x00\x00\x00--",
        b"L\xff\xff\xff\x7f",
        b"E\x01\x00\x00\x00L\x00\x00\x00\x00",
    ]:
        with pytest.raises(ValueError):
            jail_wire.decode(bad)
    with pytest.raises(jail_wire.CodecError):
        jail_wire.encode([object()])


def test_keys_that_share_one_hash_are_refused_before_a_set_or_dict_is_built():
    """Review 20, A23: a jailed child that computes nothing can hand back a set of 100,000 ints that all hash to 0
    (multiples of 2**61 - 1); building it in the test process compared each with every earlier one, minutes of CPU
    outside the child's limit. Now refused in linear time; a few such keys, and many distinct ones, still decode."""
    import struct

    m = 2**61 - 1

    def collection(tag: bytes, n: int, pairs: bool = False) -> bytes:  # built by hand: encode() would be quadratic
        item = (
            (lambda k: jail_wire.encode(k * m) + jail_wire.encode(k)) if pairs else (lambda k: jail_wire.encode(k * m))
        )
        return tag + struct.pack("<I", n) + b"".join(item(k) for k in range(n))

    for tag, pairs in ((b"E", False), (b"Z", False), (b"M", True)):
        start = time.process_time()
        with pytest.raises(jail_wire.CodecError, match="share one hash"):
            jail_wire.decode(collection(tag, 100_000, pairs))
        assert time.process_time() - start < 2.0
        assert len(jail_wire.decode(collection(tag, jail_wire.MAX_SAME_HASH, pairs))) == jail_wire.MAX_SAME_HASH
    assert jail_wire.decode(jail_wire.encode(set(range(100_000)))) == set(range(100_000))
    with pytest.raises(jail_wire.CodecError):  # a key that cannot be hashed is refused as before
        jail_wire.decode(b"E\x01\x00\x00\x00q\x04\x00\x00\x00sNaN")


def test_trampoline_keeps_the_signature_and_free_variables():
    class Base:
        def f(self, a, /, b=1, *rest, c, **kw):
            return super().__init__, a, b, rest, c, kw

    tramp = jail.trampoline(Base.f.__code__)
    assert tramp.co_freevars == Base.f.__code__.co_freevars == ("__class__",)
    space = {jail.JAIL_NAME: lambda args, kwargs: (args, kwargs)}
    fn = type(Base.f)(tramp, space, "f", Base.f.__defaults__, Base.f.__closure__)
    assert inspect.signature(fn) == inspect.signature(Base.f)
    assert fn(0, 1, 2, 3, c=4, d=5) == ((0, 1, 2, 3), {"c": 4, "d": 5})


def test_a_jailed_task_screens_structure_alone():
    from graph_planner.patch_check import screen

    before = "import re\n\n\ndef f(x):\n    return x\n"
    body = "import re\n\n\ndef f(x):\n    import os\n    return os.listdir(x)\n"
    assert screen(before, body) and screen(before, body, bodies=False) == []
    for outside in ("import os\n" + before, before + "\nY = f(1)\n", before.replace("(x)", "(x, y)")):
        assert screen(before, outside, bodies=False), outside


def test_trampoline_of_a_function_with_only_star_args():
    def f(*items, **named):
        return items

    tramp = jail.trampoline(f.__code__)
    fn = type(f)(tramp, {jail.JAIL_NAME: lambda args, kwargs: (args, kwargs)}, "f")
    assert fn(1, 2, k=3) == ((1, 2), {"k": 3}) and fn() == ((), {})


# Three calls in one test process: a large argument, then a call that searches its own memory for it (the
# zygote read every earlier request, so a child forked from it inherited what those left in its heap), then
# the control: the same search finds the text in its own call's arguments.
HARNESS_RESIDUE = (
    HARNESS_HEAD
    + """out["plant"] = [core.target("RESIDUE-" + "q7Z" * n) for n in (300, 3000, 30000, 70000)]
out["planted"] = core.target("plant", lambda text: len(text))
out["later"] = core.target("scan")
out["own"] = core.target("scan:RESIDUE-" + "q7Z" * 3)
out["zygote_alive"] = client.proc.poll() is None
print(json.dumps(out))
"""
)
# Scans the child's address space page by page around a few heap addresses; a page's readability is probed
# with rt_sigprocmask (EFAULT on an unmapped page, no effect otherwise: the filter allows it).
SCAN = """
'MARK'
if x == "plant":  # through the zygote, as a callback's argument (the test's callable gets it)
    return pids("RESI" + "DUE-" + "q7Z" * 30000)
if not x.startswith("scan"):
    return len(x)
import ctypes, errno
libc = ctypes.CDLL(None, use_errno=True)
sc = libc.syscall
sc.restype = ctypes.c_long
head, tail = ("RESI" + "DUE-").encode(), ("q7Z" * 3).encode()

def readable(addr):
    sc(ctypes.c_long(14), ctypes.c_long(99), ctypes.c_long(addr), ctypes.c_long(0), ctypes.c_long(8))
    return ctypes.get_errno() != errno.EFAULT

page, seen = 4096, set()
big = b"z" * 5000  # (allocated by malloc: in the heap, where freed buffers stay)
for anchor in (id(x), id(big), ctypes.cast(libc.malloc(1 << 16), ctypes.c_void_p).value):
    for step in (page, -page):
        p, misses = anchor & ~(page - 1), 0
        while misses < 1024 and abs(p - anchor) < (64 << 20):
            if p not in seen:
                seen.add(p)
                if readable(p):
                    misses = 0
                    chunk = ctypes.string_at(p, page)
                    at = chunk.find(head)
                    while at != -1:
                        if chunk[at + len(head) : at + len(head) + len(tail)] == tail:
                            return True
                        at = chunk.find(head, at + 1)
                else:
                    misses += 1
            p += step
return False
"""


def test_a_call_cannot_read_what_earlier_calls_sent(tmp_path):
    out = run_jailed(tmp_path, SCAN, [], harness=HARNESS_RESIDUE, call_s=10.0)
    assert out["plant"] == [8 + 3 * n for n in (300, 3000, 30000, 70000)] and out["planted"] == 90008
    assert out["own"] is True, out  # the search works: it finds the text in its own call's arguments
    assert out["later"] is False, out  # and no earlier call's arguments are in a later call's memory


HARNESS_CPU = (
    HARNESS_HEAD
    + """out["value"] = core.target(1.0)
client.close()
import resource
usage = resource.getrusage(resource.RUSAGE_CHILDREN)
out["children_cpu_s"] = usage.ru_utime + usage.ru_stime
out["zygote_alive"] = True
print(json.dumps(out))
"""
)


def test_the_cpu_a_call_burns_is_counted_for_the_process_that_started_the_jail(tmp_path):
    # The sandbox counts a run's CPU from the processes it reaps: the template's children must fold into it
    # (review 14: with the template unreaped, a call's CPU went uncounted).
    # (a fixed amount of work: a jailed call has no clock to spin by, not even its own CPU time)
    spin = "'MARK'\nfor _ in range(8_000_000):\n    pass\nreturn 'spun'"
    t = time.process_time()
    for _ in range(8_000_000):
        pass
    here = time.process_time() - t
    out = run_jailed(tmp_path, spin, [], harness=HARNESS_CPU, call_s=30.0)
    assert out["value"] == "spun" and out["children_cpu_s"] >= 0.7 * here, (here, out)
