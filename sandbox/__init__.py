"""sandbox: one OS-level sandbox for every piece of model-written code (a room of its own, no planact).

    import sandbox
    done = sandbox.run(["python", "-c", code], view=sandbox.CODE, limits=sandbox.Limits(timeout_s=10))

`process` runs commands (waits, channels, kills), `child` sets up what they start in (backend,
environment, bwrap's namespaces, rlimits), `view` builds the file-system view from an
allow-list, `uids` hands out a fresh unprivileged uid per run, `describe` prints what a sandbox sees.
aflow_rl (workflow and benchmark code) and graph_planner (repository tests) both run through it.
"""

from sandbox.process import (
    Completed,
    Drain,
    Limits,
    Sandbox,
    SandboxUnavailable,
    backend,
    clean_env,
    run,
    start,
)
from sandbox.view import CODE, SITE, View, python

__all__ = [
    "CODE",
    "Completed",
    "Drain",
    "Limits",
    "SITE",
    "Sandbox",
    "SandboxUnavailable",
    "View",
    "backend",
    "clean_env",
    "python",
    "run",
    "start",
]
