"""Run model-written code and judge it against tests, through planact's sandbox, with verdicts it cannot forge.

The candidate code runs in one sandbox (`sandboxed/subject.py`), the benchmark's tests in another
(`sandboxed/harness.py`); this process relays function calls between them as plain data. The verdict
is the harness's last line: the candidate never shares a process with the tests, never sees their
expected values and cannot write to the harness's output, so printing a marker, exiting early with
status 0, patching `check` or returning an object whose `__eq__` always agrees all score 0.
"""

from __future__ import annotations

import hashlib
import json
import queue
import sys
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path

import sandbox

_HERE = Path(__file__).with_name("sandboxed")
_LINE_CAP = 4 << 20  # one protocol message; a longer one is an error, not an allocation


def _script(name: str) -> str:
    return (_HERE / name).read_text()


@dataclass
class Verdict:
    """Outcome of running code: status ok | fail | error | timeout | memory, with the reason."""

    status: str
    detail: str = ""
    value: object = None

    @property
    def ok(self) -> bool:
        """True when the tests passed (or, for `call_function`, the call returned)."""
        return self.status == "ok"


class _Lines(threading.Thread):
    """Reads protocol lines from a pipe into a queue; None marks the end or an over-long line."""

    def __init__(self, stream):
        super().__init__(daemon=True)
        self.stream, self.q = stream, queue.Queue()
        self.start()

    def run(self) -> None:
        while True:
            line = self.stream.readline(_LINE_CAP + 1)
            if not line or len(line) > _LINE_CAP:
                self.q.put(None)
                return
            self.q.put(line)

    def get(self, deadline: float) -> bytes | None:
        try:
            return self.q.get(timeout=max(0.0, deadline - time.monotonic()))
        except queue.Empty:
            raise TimeoutError from None


class _Process:
    """A sandboxed helper script speaking the line protocol on stdin / its private stdout."""

    def __init__(self, script: str, files: dict[str, str], limits: sandbox.Limits):
        self.box = sandbox.start(
            [sys.executable, "-I", script],
            limits=limits,
            files={"wire.py": _script("wire.py"), script: _script(script), **files},
        )
        self.lines = _Lines(self.box.proc.stdout)
        self.stderr = sandbox.Drain(self.box.proc.stderr, limits.output_bytes)

    def send(self, line: bytes) -> bool:
        try:
            self.box.proc.stdin.write(line)
            self.box.proc.stdin.flush()
            return True
        except (BrokenPipeError, OSError):
            return False

    def next_line(self, deadline: float, timeout_s: float, ended: str) -> bytes | Verdict:
        """The next protocol line, or the Verdict its absence means (timeout, or `ended` / memory)."""
        try:
            line = self.lines.get(deadline)
        except TimeoutError:
            return Verdict("timeout", f"timed out after {timeout_s:g} s")
        return self.failure(ended) if line is None else line

    def failure(self, what: str) -> Verdict:
        """The status a helper's silence means: memory when it ran out, else `what`."""
        self.box.kill()
        self.stderr.join(2)
        tail = self.stderr.text()[-2000:]
        if "MemoryError" in tail:
            return Verdict("memory", "MemoryError")
        return Verdict("error", f"{what}: {tail.strip().splitlines()[-1] if tail.strip() else 'no output'}")


def _subject(code: str, limits: sandbox.Limits, deadline: float) -> tuple[_Process, Verdict | None]:
    subject = _Process("subject.py", {"candidate.py": code}, limits)
    line = subject.next_line(deadline, limits.timeout_s, "the code ended before it was loaded")
    if isinstance(line, Verdict):
        return subject, line
    hello = _json(line)
    if not hello.get("ready"):
        return subject, Verdict("error", str(hello.get("error", "load failed")))
    return subject, None


def call_function(code: str, fn: str, args: tuple = (), limits: sandbox.Limits = sandbox.Limits()) -> Verdict:
    """Load `code` in a sandbox and call `fn(*args)`; the value comes back as plain data in `value`."""
    from aflow_rl.sandboxed import wire

    deadline = time.monotonic() + limits.timeout_s
    subject, early = _subject(code, limits, deadline)
    try:
        if early:
            return early
        subject.send(wire.dumps({"fn": fn, "args": wire.encode(list(args))}))
        line = subject.next_line(deadline, limits.timeout_s, "the code ended during the call")
        if isinstance(line, Verdict):
            return line
        answer = _json(line)
        if "ok" in answer:
            try:
                return Verdict("ok", value=wire.decode(answer["ok"]))
            except (ValueError, TypeError, RecursionError) as e:
                return Verdict("error", f"malformed answer: {e}")
        return Verdict(
            "memory" if answer.get("raise") == "MemoryError" else "error",
            f"{answer.get('raise')}: {answer.get('message', '')}",
        )
    finally:
        subject.box.close()


def _json(line: bytes) -> dict:
    try:
        value = json.loads(line)
    except (ValueError, RecursionError):
        return {"raise": "ProtocolError", "message": "unreadable answer"}
    return value if isinstance(value, dict) else {"raise": "ProtocolError", "message": "unreadable answer"}


# Verdicts of programs whose text the caller vouches is drawn from a fixed, known set (the offline
# candidate coder's): the same text against the same tests is judged once per process. Timeouts are
# kept too: a mutant that loops forever would otherwise cost the full timeout in every evaluation.
# A kept verdict's detail is cut to _MEMO_DETAIL characters: a protocol line may hold 4 MB, and 8192 of
# those (a workflow returning crafted programs that fail loudly) must not fill memory.
_MEMO: OrderedDict[str, Verdict] = OrderedDict()
_MEMO_SIZE = 8192
_MEMO_DETAIL = 2000
_MEMO_LOCK = threading.Lock()


def check_solution(
    code: str,
    test: str,
    entry_point: str,
    prompt: str = "",
    limits: sandbox.Limits = sandbox.Limits(),
    memo: bool = False,
) -> Verdict:
    """Run `test` (defining `check(candidate)` or `check()`) against `code`'s `entry_point`; ok iff all pass.

    memo=True: answer from this process's memo of earlier identical checks (see _MEMO).
    """
    if not memo:
        return _check(code, test, entry_point, prompt, limits)
    key = hashlib.sha256(json.dumps([code, test, entry_point, prompt, repr(limits)]).encode()).hexdigest()
    with _MEMO_LOCK:
        if key in _MEMO:
            _MEMO.move_to_end(key)
            return _MEMO[key]
    verdict = _check(code, test, entry_point, prompt, limits)
    with _MEMO_LOCK:
        _MEMO[key] = Verdict(verdict.status, verdict.detail[:_MEMO_DETAIL], verdict.value)
        while len(_MEMO) > _MEMO_SIZE:
            _MEMO.popitem(last=False)
    return verdict


def _check(code: str, test: str, entry_point: str, prompt: str, limits: sandbox.Limits) -> Verdict:
    deadline = time.monotonic() + limits.timeout_s
    subject, early = _subject(code, limits, deadline)
    harness = None
    try:
        if early:
            return early
        spec = json.dumps({"entry_point": entry_point, "test": test, "prompt": prompt})
        harness = _Process("harness.py", {"spec.json": spec}, limits)
        while True:
            line = harness.next_line(deadline, limits.timeout_s, "the test harness stopped")
            if isinstance(line, Verdict):
                return line
            message = _json(line)
            if "verdict" in message:
                return Verdict("ok") if message["verdict"] == "pass" else Verdict("fail", message.get("error", ""))
            # A call from the tests: relay it to the candidate and its answer back, verbatim.
            subject.send(line)
            answer = subject.next_line(deadline, limits.timeout_s, "the code ended during a test")
            if isinstance(answer, Verdict):  # a candidate that dies mid-test failed it (unless it ran out of memory)
                return answer if answer.status in ("memory", "timeout") else Verdict("fail", answer.detail)
            if _json(answer).get("raise") == "MemoryError":
                return Verdict("memory", "MemoryError")
            harness.send(answer)
    finally:
        subject.box.close()
        if harness is not None:
            harness.box.close()
