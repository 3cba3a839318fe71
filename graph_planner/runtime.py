"""Where an episode's working copy lives and its tests run: the local sandbox, or Docker (not built yet).

LocalRuntime keeps one working copy per slot. `reset` makes it exactly the task's base commit with git
(the git directory and index stay outside the copy, so nothing a test run wrote there is read by git),
and `run_tests` runs pytest in planact's sandbox with that copy as the only writable place.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from graph_planner.corpus.fetch import checkout
from graph_planner.corpus.testrun import Guard, Suite, TestRun, run_in_place
from graph_planner.tasks import RepairTask


class LocalRuntime:
    """A sandboxed working copy on this machine (bubblewrap; see the sandbox package)."""

    name = "local"

    def __init__(self, root: str | Path | None = None):
        self.root = Path(root or tempfile.mkdtemp(prefix="planact-slot-")).resolve()
        self.work = self.root / "work"
        self._index = self.root / "index"
        self.task: RepairTask | None = None

    def reset(self, task: RepairTask) -> Path:
        """The working copy at the task's base commit (reset with git, never rebuilt from scratch)."""
        if not task.local:
            raise NotImplementedError(
                f"{task.instance_id} has no local repository (a SWE-bench / R2E-Gym "
                "instance): it needs the docker runtime, which is not built yet"
            )
        if self.task is not None and self.task.repo_dir != task.repo_dir:
            self._index.unlink(missing_ok=True)  # a different repository: its index means nothing here
        checkout(task.repo_dir, task.base_commit, self.work, self._index)
        self.task = task
        return self.work

    def run_tests(
        self,
        tests: list[str],
        suite: Suite | None = None,
        coverage: bool = False,
        guard: Guard = Guard(),
        confirm: bool = False,
    ) -> TestRun:
        """Run `tests` on the working copy in the sandbox (with `coverage`, recording the functions each
        calls; `guard`: the runtime guard's watch; `confirm`: the differently built second run)."""
        assert self.task is not None, "reset() first"
        return run_in_place(self.work, tests, suite or self.task.suite, coverage, guard, confirm)

    def close(self) -> None:
        """Remove the slot."""
        shutil.rmtree(self.root, ignore_errors=True)


class DockerRuntime:
    """SWE-bench / R2E-Gym images through docker-py: not built yet."""

    name = "docker"

    def __init__(self, *args, **kwargs):
        raise NotImplementedError(
            "the docker runtime (docker-py, SWE-bench / R2E-Gym images) is not built yet; "
            "use runtime 'local' with a planact corpus"
        )


def make_runtime(kind: str, root: str | Path | None = None):
    """A runtime by name: 'local' or 'docker'."""
    if kind == "local":
        return LocalRuntime(root)
    if kind == "docker":
        return DockerRuntime(root)
    raise ValueError(f"unknown runtime {kind!r}: 'local' or 'docker'")
