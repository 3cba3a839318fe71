"""Test outcomes, guard records and gold state references of repair runs, cached by task, patch and tests.

The judge (graph_planner/judge.py) reads and fills it; with a path it persists as JSONL beside a corpus, so every
run and seed over the same corpus shares what was already judged. Keys carry the verdict rules' version.
"""

from __future__ import annotations

import hashlib
import json
import threading
from pathlib import Path

# 13: a jailed pass is confirmed by a second run, and the codec refuses keys that share one hash (review 20);
# 12: lines as Python numbers them (a U+2028 no longer hides a change from the check and the off-target
# rule), no added line-break characters, the call jail (review 11); 11: rule 10 judges a receiver by what its
# root may hold (a rebinding loses an old write's permission), an attribute chain re-pointed at shared state,
# `x += y` by what it may hand back, `__init__` stores only into attributes the class lacks, library objects'
# methods as writes, and items of fresh containers (review 9); 10: rule 10 counts an augmented store into an
# item as a write into the item, and in-place library functions handed on as values or called under an
# alias (review 9); 9: the patch check's rule 10 (no write into an object the function did not create), the
# digest's per-entry dicts, lambdas by code and fixture values (review 8); 8: the digest's failure always
# compared, ints in hex, the working copy's path as one (review 8); 7: Submit's passes compared with the gold
# fix's module state after each test (state_digest.py); 6: the patch check's rule 9 (the file's own module
# state); 5: the process-wide events, a patch scores only in the functions the task's fix changes; 4: the
# name guard; 3: signed channel, runtime guard, passes confirmed by a second run, the scoped patch check
VERDICT_RULES = 13


class ResultCache:
    """Test outcomes by (task, patch hash, tests): repeated candidates in a group cost one run.

    With a `path` the outcomes also persist as JSONL lines, so every run and seed over the same corpus
    shares them (one line per write: concurrent appenders do not interleave).
    """

    def __init__(self, path: str | Path | None = None):
        self.entries: dict[str, dict] = {}
        self.records: dict[tuple, dict[str, list[str]]] = {}
        """The clean code's guard records by (task, tests, watched functions): what each function sets off."""
        self.references: dict[str, dict] = {}
        """The gold fixes' module state after each test, by (task, tests) key (state_reference)."""
        self.hits = 0
        self.path = Path(path) if path else None
        self._read_to = 0  # bytes of the file already read
        self._reading = threading.Lock()
        self._refresh()

    def _refresh(self) -> None:
        """Read the lines other processes appended since the last read (only whole lines: a writer may be
        mid-line)."""
        if self.path is None or not self.path.is_file():
            return
        with self._reading, open(self.path, "rb") as fh:
            fh.seek(self._read_to)
            data = fh.read()
            end = data.rfind(b"\n") + 1
            self._read_to += end
        for line in data[:end].decode(errors="replace").split("\n"):
            try:
                row = json.loads(line)
            except ValueError:  # a torn line of a killed writer
                continue
            if "reference" in row:
                self.references[row["key"]] = row["reference"]
            else:
                self.entries[row["key"]] = row["result"]

    def put(self, key: str, result: dict) -> None:
        """Remember a run's result (and append it to the file)."""
        self.entries[key] = result
        self._append({"key": key, "result": result})

    def put_reference(self, key: str, reference: dict) -> None:
        """Remember a gold fix's module state reference (and append it to the file, beside the results)."""
        self.references[key] = reference
        self._append({"key": key, "reference": reference})

    def _append(self, row: dict) -> None:
        if self.path is not None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with open(self.path, "a") as fh:
                fh.write(json.dumps(row) + "\n")

    def get_reference(self, key: str) -> dict | None:
        """A gold fix's module state reference, reading what concurrent runs appended on a miss."""
        if key not in self.references:
            self._refresh()
        return self.references.get(key)

    def get(self, key: str) -> dict | None:
        """A cached result, counting the hit; on a miss, first reads what concurrent runs over the same file
        have appended since (seeds run side by side share their test outcomes)."""
        if key not in self.entries:
            self._refresh()
        hit = self.entries.get(key)
        self.hits += hit is not None
        return hit

    @staticmethod
    def key(task_id: str, files: dict[str, str], tests: list[str], digest: bool = True) -> str:
        """The cache key of a run (with the verdict rules' version: a result judged under older rules, e.g.
        a forged report believed before the host's channel and canaries, is never reused; and whether its
        module state was compared: a pass judged without that never stands in for one judged with it)."""
        blob = json.dumps([task_id, sorted(files.items()), sorted(tests), VERDICT_RULES, *([] if digest else [0])])
        return hashlib.sha256(blob.encode()).hexdigest()
