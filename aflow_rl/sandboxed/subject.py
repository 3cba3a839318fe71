"""Runs model-written code and answers function calls about it, one JSON line per call (in a sandbox).

stdin: {"fn": name, "args": encoded list} lines; the protocol answers go to a private copy of the
original stdout, while whatever the code prints goes to stderr. Nothing here decides a verdict.
"""

import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # -I leaves the script's folder out
import wire  # noqa: E402

reply = os.fdopen(os.dup(1), "wb", buffering=0)
os.dup2(2, 1)


def send(message):
    reply.write(wire.dumps(message))


ns = {"__name__": "candidate"}
try:
    with open("candidate.py") as f:
        exec(compile(f.read(), "candidate.py", "exec"), ns)
except BaseException as e:  # noqa: BLE001 - any failure of the code is an answer, not a crash
    send({"ready": False, "error": f"{type(e).__name__}: {e}"[:2000]})
    sys.exit(0)
send({"ready": True})
for line in sys.stdin.buffer:
    try:
        request = json.loads(line)
        result = ns[request["fn"]](*wire.decode(request["args"]))
        send({"ok": wire.encode(result)})
    except BaseException as e:  # noqa: BLE001
        send({"raise": type(e).__name__, "message": str(e)[:2000]})
