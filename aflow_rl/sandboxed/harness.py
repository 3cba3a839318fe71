"""Runs a benchmark's tests against a candidate that lives in another process (in its own sandbox).

The candidate is reached only through `call`, which sends plain data and gets plain data back, so the
tests compare builtin values: a candidate cannot patch the tests, forge their verdict or return an
object whose __eq__ always agrees. The verdict is the last line this process writes.
"""

import builtins
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # -I leaves the script's folder out
import wire  # noqa: E402

reply = os.fdopen(os.dup(1), "wb", buffering=0)
os.dup2(2, 1)


class CandidateError(Exception):
    """The candidate raised an exception that is not a builtin one, or went away."""


def call(fn, args):
    reply.write(wire.dumps({"fn": fn, "args": wire.encode(list(args))}))
    line = sys.stdin.buffer.readline()
    if not line:
        raise CandidateError("the candidate process ended")
    answer = json.loads(line)
    if "ok" in answer:
        return wire.decode(answer["ok"])
    exc = getattr(builtins, str(answer.get("raise")), None)
    if isinstance(exc, type) and issubclass(exc, Exception):
        raise exc(answer.get("message", ""))
    raise CandidateError(f"{answer.get('raise')}: {answer.get('message', '')}")


with open("spec.json") as f:
    spec = json.load(f)
entry = spec["entry_point"]


def candidate(*args):
    return call(entry, args)


ns = {"__name__": "__test__"}
try:
    exec(compile(spec.get("prompt", ""), "prompt.py", "exec"), ns)  # helpers the tests use (HumanEval/38)
except BaseException:  # noqa: BLE001 - a prose prompt (MBPP) simply defines nothing
    pass
ns[entry] = candidate  # MBPP-style tests call the function by name
try:
    exec(compile(spec["test"], "test.py", "exec"), ns)
    check = ns["check"]
    check(candidate) if check.__code__.co_argcount else check()
    verdict = {"verdict": "pass"}
except BaseException as e:  # noqa: BLE001
    verdict = {"verdict": "fail", "error": f"{type(e).__name__}: {e}"[:2000]}
reply.write(wire.dumps(verdict))
