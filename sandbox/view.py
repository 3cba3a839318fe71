"""What a sandboxed program can see: a file-system view built from an allow-list, never from `/`.

A bwrap sandbox starts from an empty root and gets, read-only:

* the operating system's programs and libraries (`/usr` and its `/bin`, `/lib` links) with every
  Python package folder in them hidden (`dist-packages`, `site-packages`, Debian's wheel folder);
* the interpreter and its standard library (the real prefix behind a venv), its `site-packages` hidden;
* a few files of `/etc` the dynamic loader and libc read;
* a site folder (`SITE`) holding exactly the import packages of the distributions the caller names
  (for a repository's tests: pytest and what it needs), and the folders the caller names (a package's
  unpacked dependencies, planact's own pytest plugins);

plus its private working copy, a private /tmp, /dev and its own /proc. Not the project checkout, run
folders, corpora and their repositories, caches, the venv, other packages' files or wheels, home
folders or other processes: whatever holds an answer (a benchmark's canonical solutions, a task's gold
patch, the clean source) is outside the view. `python -m sandbox.describe` prints what each kind
of sandbox sees.
"""

from __future__ import annotations

import glob
import os
import sys
import sysconfig
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import metadata
from pathlib import Path

SITE = "/opt/planact-site"
"""Where the allowed import packages appear inside the sandbox (callers put it on PYTHONPATH)."""

# Files of /etc that the loader, libc and Python read; the rest of /etc (configs, credentials) stays out.
_ETC = (
    "ld.so.cache",
    "ld.so.conf",
    "ld.so.conf.d",
    "localtime",
    "passwd",
    "group",
    "nsswitch.conf",
    "alternatives",
    "mime.types",
)
# Folders of /usr where Python packages or wheels live (any interpreter, any layout): hidden.
_PACKAGE_GLOBS = (
    "/usr/lib/python3*/dist-packages",
    "/usr/lib/python3*/site-packages",
    "/usr/local/lib/python3*/dist-packages",
    "/usr/local/lib/python3*/site-packages",
    "/usr/share/python-wheels",
    "/usr/lib/python3/dist-packages",
)


@dataclass(frozen=True)
class View:
    """What one kind of sandbox sees besides the system, the interpreter, its working copy and /tmp."""

    packages: tuple[str, ...] = ()
    """Distributions whose import packages (and their requirements') are placed in SITE."""
    paths: tuple[str, ...] = ()
    """Further folders bound read-only at their own path (unpacked dependencies, plugins)."""
    extra_etc: tuple[str, ...] = field(default=())
    """Further /etc entries the program needs (none of planact's do)."""


def python() -> str:
    """The interpreter to run inside a view: the base installation's binary behind this process's (venv)
    interpreter, also for a venv made with --copies."""
    return os.path.realpath(getattr(sys, "_base_executable", None) or sys.executable)


def interpreter_prefix() -> str:
    """The installation that holds the interpreter's standard library."""
    return os.path.realpath(sys.base_prefix)


def _site_dirs() -> list[str]:
    """Package folders of the interpreter's installation (purelib / platlib of the base prefix)."""
    base = interpreter_prefix()
    out = []
    for key in ("purelib", "platlib"):
        p = sysconfig.get_paths(vars={"base": base, "platbase": base})[key]
        if os.path.isdir(p):
            out.append(os.path.realpath(p))
    return list(dict.fromkeys(out))


def _requirements(dist: metadata.Distribution) -> list[str]:
    """Names of the distributions `dist` needs on this interpreter (markers evaluated, extras left out)."""
    from packaging.requirements import Requirement

    names = []
    for line in dist.requires or []:
        req = Requirement(line)
        if req.marker is None or req.marker.evaluate({"extra": ""}):
            names.append(req.name)
    return names


@lru_cache(maxsize=64)
def site_entries(packages: tuple[str, ...]) -> tuple[tuple[str, str], ...]:
    """(name in SITE, host path) of every top-level module, package and dist-info folder of `packages`
    and the distributions they require, transitively."""
    todo, seen, out = list(packages), set(), {}
    while todo:
        name = todo.pop()
        key = name.lower().replace("_", "-")
        if key in seen:
            continue
        seen.add(key)
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            raise RuntimeError(f"sandbox view: distribution {name!r} is not installed for {sys.executable}") from None
        root = Path(dist.locate_file(""))
        for f in dist.files or []:
            top = f.parts[0]
            if top in ("..", "__pycache__") or top.endswith((".pth", ".egg-link")) or "/" in str(top):
                continue
            path = root / top
            if path.exists() and not top.endswith(".data"):
                out.setdefault(top, str(path.resolve()))
        todo += _requirements(dist)
    return tuple(sorted(out.items()))


@lru_cache(maxsize=1)
def _hide_packages() -> tuple[str, ...]:
    """Folders to cover with an empty tmpfs: Python package folders under /usr and the interpreter's."""
    found = [p for g in _PACKAGE_GLOBS for p in glob.glob(g) if os.path.isdir(p)]
    return tuple(dict.fromkeys(os.path.realpath(p) for p in [*found, *_site_dirs()]))


def bwrap_mounts(view: View, workdir: str, tmp_mb: int) -> list[str]:
    """bwrap arguments that build `view` (the working copy bound writable at its own path)."""
    args: list[str] = ["--ro-bind", "/usr", "/usr"]
    for name in ("bin", "sbin", "lib", "lib32", "lib64", "libx32"):
        p = Path("/" + name)
        if p.is_symlink():
            args += ["--symlink", os.readlink(p), str(p)]
        elif p.is_dir():
            args += ["--ro-bind", str(p), str(p)]
    args += ["--perms", "0755", "--dir", "/etc"]
    for name in (*_ETC, *view.extra_etc):
        p = Path("/etc", name)
        if p.exists():
            args += ["--ro-bind", str(p), str(p)]
    args += ["--dev", "/dev", "--proc", "/proc", "--size", str(tmp_mb << 20), "--tmpfs", "/tmp"]
    prefix = interpreter_prefix()
    if not _under(prefix, "/usr"):
        args += _dirs([prefix]) + ["--ro-bind", prefix, prefix]
    # Package folders are hidden before the caller's folders are bound: a plugin folder inside one of
    # them (a non-editable install) is still bound, on top of the empty tmpfs.
    for p in _hide_packages():
        args += ["--tmpfs", p]
    binds = [p for p in view.paths if os.path.exists(p)]
    args += _dirs([*binds, workdir, SITE + "/x"])
    for p in binds:
        args += ["--ro-bind", p, p]
    for name, path in site_entries(tuple(view.packages)):
        args += ["--ro-bind", path, f"{SITE}/{name}"]
    return args + ["--bind", workdir, workdir]


def _dirs(paths: list[str]) -> list[str]:
    """bwrap arguments that make the missing ancestors of `paths`, mode 0755 (a source's own mode, e.g.
    /root's 0700 or mkdtemp's, would lock the run's uid out of what is bound below it)."""
    found = {str(a) for p in paths for a in Path(p).parents if str(a) not in ("/", "/tmp", "/usr")}
    out: list[str] = []
    for d in sorted(found, key=lambda x: x.count("/")):
        out += ["--perms", "0755", "--dir", d]
    return out


def _under(path: str, parent: str) -> bool:
    return os.path.commonpath([os.path.abspath(path), parent]) == parent


# --- the kinds of sandbox planact runs, and a command that shows what each sees ---

CODE = View()
"""AFlow's candidate programs and benchmark harness: the standard library only."""


def pytest_view(paths: tuple[str, ...] = ()) -> View:
    """A repository's test run: pytest (with what it needs) plus `paths` (dependencies, plugins)."""
    return View(packages=("pytest",), paths=paths)
