"""A model-written workflow that runs in a sandbox, with its operator calls proxied back to the host.

graph.py passes the AST allow-list (aflow_rl.workflow.validate) and then runs, import-rewritten, in
planact's sandbox (`sandboxed/workflow_host.py`: the standard library only, no files, no network),
never in the evaluator's process. Its operators and LLM there are stand-ins: every call arrives here as
a JSON line over the sandbox's pipes, runs with the real operator and model (so local models keep
batching across concurrent problems, and usage is counted here), and its plain-data answer goes back.
Each call runs in the context of the problem it belongs to, so seeded sampling is the same as in-process.
"""

from __future__ import annotations

import ast
import asyncio
import contextvars
import json
import sys
import threading
from pathlib import Path

import sandbox
from aflow_rl import operators as operators_module
from aflow_rl.llm import LLMHandle, create_llm_instance
from aflow_rl.operators import OPERATORS
from aflow_rl.workflow import checked_tree, prompt_constants

_SCRIPT = Path(__file__).with_name("sandboxed") / "workflow_host.py"
_LINE_CAP = 4 << 20  # one protocol line; a longer one ends the box
LIMITS = sandbox.Limits(timeout_s=6 * 3600, cpu_s=600, memory_mb=512, processes=8, output_bytes=64 * 1024)
"""The graph's own process: wall time as long as an evaluation may take (its model calls run here, not
there), CPU for the graph's own code only."""


class WorkflowLoadError(ValueError):
    """graph.py was refused by the check or did not load in its sandbox."""


class SandboxedWorkflow:
    """`await workflow(*args)` as AFlow's Workflow, with the graph in a sandbox; `close()` when done."""

    def __init__(
        self,
        graph_src: str,
        prompt_src: str,
        llm_config: LLMHandle,
        name: str,
        dataset: str,
        max_operator_calls: int = 10,
        limits: sandbox.Limits = LIMITS,
    ):
        try:
            tree = checked_tree(graph_src, prompt_src, max_operator_calls)
        except ValueError as e:
            raise WorkflowLoadError(str(e)) from None
        self._llm_config, self._llm = llm_config, None
        self._ops: dict[int, operators_module.Operator] = {}
        self._solving: dict[int, tuple[asyncio.Future, contextvars.Context]] = {}
        self._next = 0
        self._write = threading.Lock()
        self.loop: asyncio.AbstractEventLoop | None = None
        self.box = sandbox.start(
            [sys.executable, "-I", _SCRIPT.name], limits=limits, files={_SCRIPT.name: _SCRIPT.read_text()}
        )
        self._stderr = sandbox.Drain(self.box.proc.stderr, limits.output_bytes)
        self._send(
            {
                "graph": ast.unparse(tree),
                "prompt": prompt_constants(prompt_src),
                "operators": list(OPERATORS),
                "name": name,
                "dataset": dataset,
            }
        )
        hello = self._read_line()
        if not hello.get("ready"):
            self.close()
            raise WorkflowLoadError(f"workflow did not load in its sandbox: {hello.get('error', self._tail())}")
        self._reader = None

    @property
    def llm(self):
        """The host's LLM (built on the first model call: a graph may call none); usage is counted here."""
        if self._llm is None:
            self._llm = create_llm_instance(self._llm_config)
        return self._llm

    def usage(self) -> dict:
        """AFlow's usage summary of this workflow's model calls."""
        return self._llm.get_usage_summary() if self._llm is not None else {"total_cost": 0.0}

    # --- protocol ---

    def _send(self, message: dict) -> None:
        with self._write:
            try:
                self.box.proc.stdin.write((json.dumps(message, default=repr) + "\n").encode())
                self.box.proc.stdin.flush()
            except (BrokenPipeError, OSError):
                pass  # the box is gone: the reader fails what is pending

    def _read_line(self) -> dict:
        line = self.box.proc.stdout.readline(_LINE_CAP + 1)
        if not line or len(line) > _LINE_CAP:
            return {}
        try:
            message = json.loads(line)
        except (ValueError, RecursionError):  # RecursionError (nesting) would pass for a closed loop below
            return {}
        return message if isinstance(message, dict) else {}

    def _tail(self) -> str:
        self._stderr.join(0.5)
        text = self._stderr.text().strip()
        return text.splitlines()[-1] if text else "no output"

    def _read_forever(self) -> None:
        try:
            while True:
                message = self._read_line()
                if not message:
                    break
                self.loop.call_soon_threadsafe(self._dispatch, message)
            self.loop.call_soon_threadsafe(self._ended)
        except RuntimeError:
            pass  # the evaluation's event loop has closed: nobody waits for an answer any more

    def _ended(self) -> None:
        for future, _ in self._solving.values():
            if not future.done():
                future.set_exception(RuntimeError(f"the workflow's sandbox ended: {self._tail()}"))
        self._solving.clear()

    def _dispatch(self, message: dict) -> None:
        if "done" in message:
            future, _ = self._solving.pop(message["done"], (None, None))
            if future is not None and not future.done():
                if "error" in message:
                    future.set_exception(RuntimeError(str(message["error"])))
                else:
                    future.set_result(message.get("value"))
        elif "call" in message:
            _, ctx = self._solving.get(message.get("solve"), (None, contextvars.copy_context()))
            # the call runs in its problem's context: seeded sampling numbers it as an in-process call
            self.loop.create_task(self._answer(message), context=ctx.copy())

    async def _answer(self, message: dict) -> None:
        try:
            value = await self._call(message)
            self._send({"reply": message["call"], "value": value})
        except Exception as e:  # noqa: BLE001 - an operator failure is the graph's exception, as in-process
            self._send({"reply": message["call"], "error": f"{type(e).__name__}: {e}"[:500]})

    async def _call(self, message: dict):
        kwargs = dict(message.get("kwargs") or {})
        if message.get("op") == "__llm__":
            return await self.llm(str(kwargs.get("prompt", "")), kwargs.get("temperature"))
        kind = str(message.get("op"))
        if kind not in OPERATORS:
            raise ValueError(f"unknown operator {kind!r}")
        n = int(message.get("instance", -1))
        if n not in self._ops:
            init = {k: v for k, v in (message.get("init") or {}).items() if k in ("name", "vote_count")}
            self._ops[n] = getattr(operators_module, kind)(self.llm, **init)
        return await self._ops[n](*list(message.get("args") or []), **kwargs)

    # --- AFlow's Workflow face ---

    async def __call__(self, *args):
        """Run the graph's `__call__` on `args` in the sandbox (its operator calls answered here)."""
        if self.loop is None:
            self.loop = asyncio.get_running_loop()
            self._reader = threading.Thread(target=self._read_forever, daemon=True)
            self._reader.start()
        n, self._next = self._next, self._next + 1
        future = self.loop.create_future()
        self._solving[n] = (future, contextvars.copy_context())
        self._send({"solve": n, "args": list(args)})
        return await future

    def close(self) -> None:
        """End the sandbox."""
        try:
            self.box.proc.stdin.close()
        except OSError:
            pass
        self.box.close()
