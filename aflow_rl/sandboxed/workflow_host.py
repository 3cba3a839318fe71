"""Runs a model-written AFlow graph.py inside a sandbox; its operators live in the host (stdlib only here).

The host sends the checked, import-rewritten graph source and the prompt constants first. The graph
runs with a short list of builtins, and its operators and LLM are stand-ins: each call becomes a JSON
line to the host, which runs the real operator with the real model and answers on stdin. Then the
host sends {"solve": id, "args": [...]} lines; each runs `await workflow(*args)` concurrently, and the
answer goes back as {"done": id, "value": ...} or {"done": id, "error": ...}. Protocol lines go to a
private copy of stdout; whatever the graph prints goes to stderr.
"""

import asyncio
import builtins
import contextvars
import itertools
import json
import os
import re
import sys
import threading
import types
import typing

reply = os.fdopen(os.dup(1), "wb", buffering=0)
os.dup2(2, 1)
_lock = threading.Lock()


def send(message):
    line = (json.dumps(message, default=repr) + "\n").encode()
    with _lock:
        reply.write(line)


# aflow_rl/restricted.py's _BUILTIN_NAMES plus class creation (this file cannot import the package).
BUILTINS = tuple(
    "len range str int float bool list dict set tuple min max sum sorted reversed enumerate zip any all abs round "
    "isinstance Exception ValueError KeyError IndexError TypeError RuntimeError __build_class__".split()
)
FACES = {
    "typing": types.SimpleNamespace(
        **{n: getattr(typing, n) for n in ("Any", "Callable", "Dict", "List", "Literal", "Optional", "Tuple", "Union")}
    ),
    "asyncio": types.SimpleNamespace(gather=asyncio.gather),
    "re": types.SimpleNamespace(
        **{
            n: getattr(re, n)
            for n in ("search", "match", "fullmatch", "findall", "sub", "split", "DOTALL", "IGNORECASE", "MULTILINE")
        }
    ),
}
solving = contextvars.ContextVar("solving", default=None)  # the host's id of the problem a call belongs to
_ids = itertools.count()
_pending = {}
loop = None


async def ask(message):
    """Send a call to the host and wait for its answer."""
    n = next(_ids)
    future = loop.create_future()
    _pending[n] = future
    send({**message, "call": n, "solve": solving.get()})
    return await future


class LLMStandIn:
    """What `create_llm_instance` gives the graph: calling it asks the host's model."""

    async def __call__(self, prompt, temperature=None):
        return await ask({"op": "__llm__", "kwargs": {"prompt": prompt, "temperature": temperature}})

    def get_usage_summary(self):
        return {"total_cost": 0.0}  # usage is counted where the model runs: the host


def operator_stand_in(kind):
    class StandIn:
        def __init__(self, llm=None, name=None, **init):
            self.instance = next(_ids)
            self.init = {"name": name, **init}

        async def __call__(self, *args, **kwargs):
            return await ask(
                {"op": kind, "instance": self.instance, "init": self.init, "args": list(args), "kwargs": kwargs}
            )

    StandIn.__name__ = kind
    return StandIn


def main():
    global loop
    spec = json.loads(sys.stdin.readline())
    llm_face = types.SimpleNamespace(create_llm_instance=lambda config=None: LLMStandIn())
    ns = {
        "__name__": "aflow_graph",
        "__builtins__": {n: getattr(builtins, n) for n in BUILTINS},
        "__aflow_prompt__": types.SimpleNamespace(**spec["prompt"]),
        "__aflow_operator__": types.SimpleNamespace(**{k: operator_stand_in(k) for k in spec["operators"]}),
        "__aflow_mod__": llm_face,
        "__aflow_llm__": llm_face,
        "__aflow_faces__": FACES,
        "create_llm_instance": llm_face.create_llm_instance,
    }
    try:
        exec(compile(spec["graph"], "graph.py", "exec"), ns)
        workflow = ns["Workflow"](name=spec["name"], llm_config=None, dataset=spec["dataset"])
    except BaseException as e:  # noqa: BLE001 - a graph that does not load is an answer, not a crash
        send({"ready": False, "error": f"{type(e).__name__}: {e}"[:2000]})
        return
    send({"ready": True})
    loop = asyncio.new_event_loop()

    async def solve(n, args):
        solving.set(n)
        try:
            out = await workflow(*args)
            send({"done": n, "value": out[0] if isinstance(out, tuple) else out})
        except Exception as e:  # noqa: BLE001 - a workflow bug fails this problem only
            send({"done": n, "error": f"{type(e).__name__}: {e}"[:500]})

    def on_line(line):
        message = json.loads(line)
        if "solve" in message:
            loop.create_task(solve(message["solve"], message["args"]))
        elif message.get("reply") in _pending:
            future = _pending.pop(message["reply"])
            if "error" in message:
                future.set_exception(RuntimeError(message["error"]))
            else:
                future.set_result(message["value"])

    def read():
        for line in sys.stdin.buffer:
            loop.call_soon_threadsafe(on_line, line)
        loop.call_soon_threadsafe(loop.stop)

    threading.Thread(target=read, daemon=True).start()
    loop.run_forever()


main()
