"""Drain: a thread that reads a sandboxed program's pipe to its end, keeping a bounded prefix.

Reading to the end (not stopping at the cap) keeps a print flood from blocking the program on a full
pipe, and keeping only `cap` bytes keeps it from growing the caller.
"""

from __future__ import annotations

import threading


class Drain(threading.Thread):
    """Reads a pipe to its end in 64 KiB chunks, keeping the first `cap` bytes."""

    def __init__(self, stream, cap: int):
        super().__init__(daemon=True)
        self.stream, self.cap, self.kept, self.total = stream, cap, bytearray(), 0
        self.start()

    def run(self) -> None:
        while chunk := self.stream.read1(65536) if hasattr(self.stream, "read1") else self.stream.read(65536):
            self.total += len(chunk)
            if len(self.kept) < self.cap:
                self.kept += chunk[: self.cap - len(self.kept)]

    def text(self) -> str:
        return bytes(self.kept).decode("utf-8", "replace")
