"""Durable files under the run folder: run state and checkpoint bookkeeping (experience: planact.experience).

Every write is atomic (temp file, fsync, rename, fsync of the folder): a write
that returned is on disk, and a SIGKILL at any point leaves either the old or
the new file, never a torn one.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path


def atomic_write(path: str | Path, data: bytes | str) -> None:
    """Write `data` to `path` so that readers see the old or the new content, never a mix."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    raw = data.encode() if isinstance(data, str) else data
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(raw)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    fsync_path(path.parent)


def fsync_path(path: str | Path) -> None:
    """fsync one file or folder (a folder's fsync makes the names created in it durable)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_tree(folder: str | Path) -> None:
    """fsync every file under `folder`, each folder, and `folder`'s parent: the tree is durable before
    anything (state.json) points at it."""
    folder = Path(folder)
    for root, _dirs, files in os.walk(folder):
        for name in files:
            fsync_path(os.path.join(root, name))
    for d in [p for p, _, _ in os.walk(folder)] + [str(folder.parent)]:
        fsync_path(d)


class RunState:
    """The run's resume point: last completed round, MLflow run id, round table. One file per agent role.

    Rounds are numbered from 1; round 0 is the warm start; -1 means nothing is done yet.
    """

    def __init__(self, run_dir: str | Path, agent_role: str = "both"):
        self.run_dir = Path(run_dir)
        suffix = "" if agent_role == "both" else f"-{agent_role}"
        self.path = self.run_dir / f"state{suffix}.json"
        self.data: dict = (
            json.loads(self.path.read_text())
            if self.path.is_file()
            else {
                "last_completed_round": -1,
                "mlflow_run_id": None,
                "checkpoint": None,
                "warm_started": False,
                "table": [],
                "pending_metrics": [],
            }
        )

    @property
    def next_round(self) -> int:
        """The first round not yet completed."""
        return self.data["last_completed_round"] + 1

    def save(self) -> None:
        """Persist atomically."""
        atomic_write(self.path, json.dumps(self.data, indent=1))


def checkpoint_dir(run_dir: str | Path, round_idx: int) -> Path:
    """Folder of the checkpoint taken after `round_idx` (round 0 = the warm start)."""
    name = "warm_start" if round_idx <= 0 else f"round_{round_idx:05d}"
    return Path(run_dir) / "checkpoints" / name


def prune_checkpoints(run_dir: str | Path, keep: list[Path], roles: list[str]) -> None:
    """Delete these roles' round checkpoints except those in `keep` (the warm start always stays).

    Per role, because in two-job mode each job owns only its role's sub-folder.
    """
    root = Path(run_dir) / "checkpoints"
    keep_set = {Path(k).resolve() for k in keep}
    for p in root.glob("round_*"):
        if p.resolve() in keep_set:
            continue
        for role in roles:
            shutil.rmtree(p / role, ignore_errors=True)
        # The other job may prune or fill the same round folder at this moment: rmdir only an empty
        # folder and treat "already gone" or "just filled" as done, never as a failed round.
        try:
            p.rmdir()
        except OSError:  # ENOENT or ENOTEMPTY
            pass
