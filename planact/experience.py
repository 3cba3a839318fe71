"""The experience pool: a durable, append-only store, served to many writers by one Ray actor.

Durability: an append writes its batch as one JSON line (so a batch is all there or not at all),
flushes and fsyncs the file (and the folder when the file is new) before it returns, so a returned
append is an acknowledgement: a SIGKILL at any later moment loses none of it. A SIGKILL during an
append can leave one torn last line; readers skip it and the next writer cuts it off before appending. Writers in
different processes (two
actors on shared storage, or plain library users) serialise through an exclusive flock.

Items are dicts with an `id`; re-appending an id replaces the earlier item (a re-run round stays
counted once), and `compact()` rewrites the file with only the latest copy of each id. A round's items are
made by its `RoundBatch` (planact/batch.py), the one conversion between a round's samples and this store.
"""

from __future__ import annotations

import fcntl
import json
import os
import random
import time
from collections import Counter
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from planact.storage import atomic_write, fsync_path

INDEX_FIELDS = ("run", "round", "role", "anchor")


class ExperienceStore:
    """Append / query / sample / stats / compact over <path>/pool.jsonl."""

    def __init__(self, path: str | Path):
        self.dir = Path(path)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.file = self.dir / "pool.jsonl"
        self.lock_file = self.dir / "pool.lock"
        self._items: dict[str, dict] = {}
        self._offset = 0
        self._torn = 0
        self._lines = 0
        self.refresh()

    @contextmanager
    def _locked(self):
        with open(self.lock_file, "a") as lf:
            fcntl.flock(lf, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(lf, fcntl.LOCK_UN)

    def refresh(self) -> None:
        """Read what other writers appended since the last read (a torn last line is left for later)."""
        if not self.file.is_file():
            self._items, self._offset = {}, 0
            return
        st = self.file.stat()
        if st.st_ino != getattr(self, "_ino", st.st_ino) or st.st_size < self._offset:
            self._items, self._offset, self._lines = {}, 0, 0  # compacted (replaced) by another writer: reread
        self._ino = st.st_ino
        with open(self.file, "rb") as f:
            f.seek(self._offset)
            chunk = f.read()
        consumed = 0
        for raw in chunk.split(b"\n")[:-1]:  # the part after the last newline is incomplete
            consumed += len(raw) + 1
            try:
                item = json.loads(raw)
            except ValueError:
                self._torn += 1
                continue
            batch = item["items"] if "items" in item and "id" not in item else [item]
            for it in batch:
                self._lines += 1
                self._items[it["id"]] = it
        self._offset += consumed

    def append(self, items: list[dict]) -> int:
        """Persist items durably; returns how many were acknowledged (all of them) once they are on disk."""
        if not items:
            return 0
        now = time.time()
        if any("id" not in it for it in items):
            raise ValueError("every experience item needs an 'id'")
        # One line per batch: a writer killed mid-batch leaves one torn line, never half a batch visible.
        data = (
            json.dumps({"items": [{"ts": now, "priority": 1.0, **it} for it in items]}, separators=(",", ":")) + "\n"
        ).encode()
        with self._locked():
            new_file = not self.file.exists()
            with open(self.file, "ab+") as f:
                f.seek(0, os.SEEK_END)
                end = f.tell()
                if end:
                    f.seek(end - 1)
                    if f.read(1) != b"\n":  # a writer died mid-line: cut the torn tail before appending
                        f.seek(0)
                        body = f.read()
                        f.truncate(body.rfind(b"\n") + 1)
                        f.seek(0, os.SEEK_END)
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
            if new_file:
                fsync_path(self.dir)
        self.refresh()
        return len(items)

    def __len__(self) -> int:
        return len(self._items)

    def query(
        self,
        run: str | None = None,
        round: int | None = None,
        role: str | None = None,
        anchor: str | None = None,
        limit: int | None = None,
        **fields,
    ) -> list[dict]:
        """Items matching every given field, oldest first (limit keeps the newest)."""
        self.refresh()
        want = {
            k: v
            for k, v in {"run": run, "round": round, "role": role, "anchor": anchor, **fields}.items()
            if v is not None
        }
        out = [it for it in self._items.values() if all(it.get(k) == v for k, v in want.items())]
        out.sort(key=lambda it: (it.get("ts", 0.0), it["id"]))
        return out[-limit:] if limit else out

    def sample(self, n: int, by: str = "recency", seed: int = 0, **filters) -> list[dict]:
        """n items: the newest (by='recency') or drawn without replacement in proportion to 'priority'."""
        pool = self.query(**filters)
        if by == "recency":
            return pool[-n:]
        if by != "priority":
            raise ValueError(f"sample by {by!r}: use 'recency' or 'priority'")
        rng = random.Random(seed)
        keyed = sorted(
            pool, key=lambda it: rng.random() ** (1.0 / max(float(it.get("priority", 1.0)), 1e-9)), reverse=True
        )
        return keyed[:n]  # Efraimidis-Spirakis weighted sampling without replacement

    def stats(self) -> dict:
        """Counts per run / role / round, superseded duplicates, torn lines skipped, bytes on disk."""
        self.refresh()
        items = list(self._items.values())
        return {
            "items": len(items),
            "duplicates": self._lines - len(items),
            "torn_lines": self._torn,
            "bytes": self.file.stat().st_size if self.file.exists() else 0,
            "by_role": dict(Counter(str(it.get("role")) for it in items)),
            "by_run": dict(Counter(str(it.get("run")) for it in items)),
            "rounds": len({(it.get("run"), it.get("round")) for it in items}),
        }

    def compact(self) -> dict:
        """Rewrite the file with the latest copy of each id (atomically); returns before/after sizes."""
        with self._locked():
            self._items, self._offset, self._lines = {}, 0, 0
            self.refresh()
            before = self.file.stat().st_size if self.file.exists() else 0
            items = sorted(self._items.values(), key=lambda it: (it.get("ts", 0.0), it["id"]))
            atomic_write(self.file, "".join(json.dumps(it, separators=(",", ":")) + "\n" for it in items))
            self._offset, self._lines = self.file.stat().st_size, len(items)
        return {"bytes_before": before, "bytes_after": self._offset, "items": len(items)}


class ExperiencePoolActor:
    """A Ray actor around one ExperienceStore: the process every worker sends its experience to."""

    def __init__(self, path: str):
        self.store = ExperienceStore(path)

    def append(self, items: list[dict]) -> int:
        """Acknowledged count, returned only after the items are on disk."""
        from planact import faults

        faults.point("pool.mid_append")
        return self.store.append(items)

    def query(self, **filters) -> list[dict]:
        """See ExperienceStore.query."""
        return self.store.query(**filters)

    def sample(self, n: int, by: str = "recency", seed: int = 0, **filters) -> list[dict]:
        """See ExperienceStore.sample."""
        return self.store.sample(n, by, seed, **filters)

    def stats(self) -> dict:
        """See ExperienceStore.stats."""
        return self.store.stats()

    def compact(self) -> dict:
        """See ExperienceStore.compact."""
        return self.store.compact()

    def pid(self) -> int:
        """The actor's process id (tests kill it)."""
        return os.getpid()


def pool_actor(path: str | Path, name: str, namespace: str = "planact"):
    """Get or create the named pool actor for `path` (owned by the caller: it goes when the caller's job ends)."""
    import ray

    cls = ray.remote(num_cpus=0, max_restarts=-1, max_task_retries=0)(ExperiencePoolActor)
    return cls.options(name=name, namespace=namespace, get_if_exists=True).remote(str(Path(path).resolve()))


class PoolRef:
    """A small, picklable pointer to a pool actor (what flows and tasks pass around instead of the data)."""

    __slots__ = ("path", "name", "namespace")

    def __init__(self, path: str | Path, name: str, namespace: str = "planact"):
        self.path, self.name, self.namespace = str(Path(path).resolve()), name, namespace

    def __getstate__(self):
        return (self.path, self.name, self.namespace)

    def __setstate__(self, state):
        self.path, self.name, self.namespace = state

    def __repr__(self) -> str:
        return f"PoolRef({self.name!r} -> {self.path})"

    def handle(self):
        """The live actor (recreated from the path if it went away: the data is on disk)."""
        return pool_actor(self.path, self.name, self.namespace)

    # ExperiencePoolActor's methods, each called on the actor and waited for: named here (not passed as a
    # string) so that a reader and a type checker can follow a call to the store method it runs.
    def append(self, items: list[dict]) -> int:
        """ExperienceStore.append: the acknowledged count, once the items are on disk."""
        return _wait(self.handle().append.remote(items))

    def query(self, **filters) -> list[dict]:
        """ExperienceStore.query: items matching every given field, oldest first."""
        return _wait(self.handle().query.remote(**filters))

    def sample(self, n: int, by: str = "recency", seed: int = 0, **filters) -> list[dict]:
        """ExperienceStore.sample: n items, the newest or drawn by priority."""
        return _wait(self.handle().sample.remote(n, by, seed, **filters))

    def stats(self) -> dict:
        """ExperienceStore.stats: counts, superseded duplicates, bytes on disk."""
        return _wait(self.handle().stats.remote())

    def compact(self) -> dict:
        """ExperienceStore.compact: the file rewritten with the latest copy of each id."""
        return _wait(self.handle().compact.remote())


def _wait(ref: Any) -> Any:
    import ray  # lazily: the store alone (tests, benchmarks, the resume check) needs no Ray

    return ray.get(ref)


def record(pool: PoolRef, items: list[dict], compact_over: int = 1000) -> dict:
    """Persist a batch durably (acknowledged = on disk), report the pool's statistics, and compact it when
    `compact_over` superseded copies piled up: one round's experience step."""
    acked = pool.append(items)
    stats = pool.stats()
    if stats["duplicates"] >= compact_over:
        stats = {**stats, **pool.compact()}
    return {"acknowledged": acked, **stats}
