"""Getting a package's source once: an sdist fetched with pip (sha256-pinned) into a cache, unpacked,
and committed into a git repository whose commits are the tasks' base commits.

The cache is keyed by the archive's sha256, so a later build (and every episode) is offline. Git runs
with a fixed identity and date, so the same corpus builds the same commit ids on every machine.
"""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
import tarfile
import tempfile
import zipfile
from pathlib import Path

from planact.fetch import CACHE_ROOT, FetchError, pip_download, sha256  # noqa: F401 - re-exported for the corpus

DEFAULT_CACHE = CACHE_ROOT / "sdists"
log = logging.getLogger(__name__)
_GIT_ENV = {
    "GIT_AUTHOR_NAME": "planact",
    "GIT_AUTHOR_EMAIL": "corpus@planact.invalid",
    "GIT_COMMITTER_NAME": "planact",
    "GIT_COMMITTER_EMAIL": "corpus@planact.invalid",
    "GIT_AUTHOR_DATE": "2000-01-01T00:00:00+0000",
    "GIT_COMMITTER_DATE": "2000-01-01T00:00:00+0000",
}


def fetch_sdist(name: str, version: str, digest: str, cache: Path = DEFAULT_CACHE) -> Path:
    """The sdist of name==version with this sha256: from the cache, else downloaded once by pip.

    An empty `digest` fetches unpinned (for trying a new package); pin the hash the report prints."""
    return pip_download(name, version, digest, cache)


def unpack(archive: Path, dest: Path) -> Path:
    """Unpack an sdist into `dest` (its single top folder's contents become `dest`)."""
    with tempfile.TemporaryDirectory() as tmp:
        if archive.name.endswith(".zip"):
            with zipfile.ZipFile(archive) as z:
                z.extractall(tmp)  # zipfile drops ".." and leading slashes, and makes no links
        else:
            with tarfile.open(archive) as t:
                for name in _extract(t, tmp):
                    log.warning("%s: %s links out of its folder, left out", archive.name, name)
        tops = list(Path(tmp).iterdir())
        top = tops[0] if len(tops) == 1 and tops[0].is_dir() else Path(tmp)
        for path in top.rglob("*"):  # what was written, read again: the same rule on each link's text
            if path.is_symlink() and _leads_out(os.readlink(path)):
                raise ValueError(f"{path.relative_to(top)}: a link that could lead out of the folder; not unpacked")
        if dest.exists():
            shutil.rmtree(dest)
        shutil.copytree(top, dest, symlinks=True)
    return dest


# Longer than any honest sdist's: names near PATH_MAX are how a link chain hides where it leads (below).
MAX_NAME = 1024


def _leads_out(path: str) -> bool:
    """Whether a member name or link target could lead out of the folder, judged on its text alone."""
    return os.path.isabs(path) or ".." in Path(path).parts or len(path) > MAX_NAME


def _extract(t: tarfile.TarFile, to: str) -> list[str]:
    """Extract after planact's own check of every member, on every Python, before anything is written: files,
    folders and links only, names as `_leads_out` allows (else the archive is refused), set-id and others' write
    bits cleared, owned by this user. A link whose target is absolute or climbs with ".." is left out (its name is
    returned; an honest sdist's docs link to ../CHANGES goes, a package that needed it fails its own tests and
    yields no task): links that only point down cannot lead out, however they chain. tarfile's "data" filter runs
    too where the Python has it (3.10.12+, 3.11.4+), not alone: it resolves links with `os.path.realpath`, which
    stops following them past PATH_MAX, so a chain of links to long folder names, then "..", wrote outside the
    folder through it (review 19, on 3.10.13-3.13.0; the CVE-2025-4517 class)."""
    kept, dropped = [], []
    for m in t.getmembers():
        if not (m.isfile() or m.isdir() or m.issym() or m.islnk()):
            raise ValueError(f"{m.name}: neither a file, a folder nor a link; not unpacked")
        if _leads_out(m.name):
            raise ValueError(f"{m.name}: a name that could lead out of the archive's folder; not unpacked")
        if (m.issym() or m.islnk()) and _leads_out(m.linkname):
            dropped.append(m.name)
            continue
        m.mode &= 0o755  # no set-id bits, nothing writable by others (as the data filter)
        m.uid, m.gid, m.uname, m.gname = os.getuid(), os.getgid(), "", ""
        kept.append(m)
    if hasattr(tarfile, "data_filter"):
        t.extractall(to, members=kept, filter="data")
    else:
        t.extractall(to, members=kept)
    return dropped


def git(
    repo: Path,
    *args: str,
    index: Path | None = None,
    work_tree: Path | None = None,
    input: str | None = None,
    strip: bool = True,
) -> str:
    """Run git on a (bare) repository with a fixed identity; returns stdout (stripped unless strip=False)."""
    env = {**os.environ, **_GIT_ENV}
    if index is not None:
        env["GIT_INDEX_FILE"] = str(index)
    cmd = ["git", "-c", "safe.directory=*", "-c", "core.hooksPath=/dev/null", f"--git-dir={repo}"]
    if work_tree is not None:
        cmd.append(f"--work-tree={work_tree}")
    done = subprocess.run(cmd + list(args), capture_output=True, text=True, env=env, input=input)
    if done.returncode != 0:
        raise RuntimeError(f"git {' '.join(args)}: {done.stderr.strip()}")
    return done.stdout.strip() if strip else done.stdout


def init_repo(source: Path, repo: Path) -> str:
    """Commit `source` as the first commit of a new bare repository `repo`; returns the commit id."""
    if repo.exists():
        shutil.rmtree(repo)
    subprocess.run(["git", "init", "-q", "--bare", str(repo)], check=True)
    with tempfile.TemporaryDirectory() as tmp:
        index = Path(tmp) / "index"
        git(repo, "add", "-A", "-f", ".", index=index, work_tree=source)
        tree = git(repo, "write-tree", index=index)
    commit = git(repo, "commit-tree", tree, "-m", f"clean source of {source.name}")
    git(repo, "update-ref", "refs/heads/main", commit)
    return commit


def commit_change(repo: Path, parent: str, path: str, text: str, message: str, tag: str) -> str:
    """A commit on top of `parent` where `path` holds `text`, tagged `tag`; returns its id."""
    blob = git(repo, "hash-object", "-w", "--stdin", input=text)
    with tempfile.TemporaryDirectory() as tmp:
        index = Path(tmp) / "index"
        git(repo, "read-tree", parent, index=index)
        entry = git(repo, "ls-tree", parent, path).split()
        if not entry:
            raise FileNotFoundError(f"{path} is not a file of commit {parent}")
        mode = entry[0]
        git(repo, "update-index", "--cacheinfo", f"{mode},{blob},{path}", index=index)
        tree = git(repo, "write-tree", index=index)
    commit = git(repo, "commit-tree", tree, "-p", parent, "-m", message)
    git(repo, "update-ref", f"refs/tags/{tag}", commit)
    return commit


def checkout(repo: Path, commit: str, work_tree: Path, index: Path) -> None:
    """Make `work_tree` exactly `commit`: tracked files restored, everything else removed.

    The git directory and index live outside the working copy, so nothing a sandboxed run wrote there
    (a planted `.git`, hooks, config) is ever read by git.
    """
    work_tree.mkdir(parents=True, exist_ok=True)
    planted = work_tree / ".git"  # git clean never removes a top-level .git; nothing of ours lives there
    if planted.is_dir() and not planted.is_symlink():
        shutil.rmtree(planted)
    elif planted.exists() or planted.is_symlink():
        planted.unlink()
    git(repo, "clean", "-ffdxq", index=index, work_tree=work_tree) if index.exists() else None
    # read-tree + checkout-index never touch HEAD: slots share the repository and must not race on a ref;
    # checkout-index -f rewrites every tracked file, even one changed in place with the same size and time
    git(repo, "read-tree", "--reset", "-u", commit, index=index, work_tree=work_tree)
    git(repo, "checkout-index", "-a", "-f", index=index, work_tree=work_tree)
    git(repo, "clean", "-ffdxq", index=index, work_tree=work_tree)
