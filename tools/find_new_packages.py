"""Find candidate packages for the corpus's `unseen_2025` split: first released on PyPI in 2025 or later.

A pretrained model whose data was collected before 2025 cannot have read these packages, so repair tasks
from them tell memory apart from skill. PyPI offers no listing by creation date that answers here (its RSS
feeds and XML-RPC are closed to this machine; the simple index and the JSON API are open), so this script
samples names from the simple index with a fixed seed and asks the JSON API about each:

  python tools/find_new_packages.py --sample 3000 --seed 1 > candidates.yaml

With --names it asks about the named projects instead of a sample (any first-release date unless --since
is given): the same facts and YAML for training packages, e.g. `--names cachetools wcwidth --split train`.

A candidate has every release uploaded on or after --since, a pure-Python wheel and an sdist, at most
--max-deps runtime requirements, and at least --min-tests `def test_` functions in the sdist. The output
is corpus YAML (name, version, sha256, split: unseen_2025) with the facts as comments; `planact-repair
corpus` then decides which of them can make tasks (a package whose suite cannot run here is reported
unusable). PyPI changes daily, so a later run finds other names: the pins in the corpus config, not this
script, make builds repeatable.
"""

from __future__ import annotations

import argparse
import io
import json
import random
import re
import sys
import tarfile
import urllib.parse
import urllib.request
import zipfile
from concurrent.futures import ThreadPoolExecutor

INDEX = "https://pypi.org/simple/"
_TEST_FILE = re.compile(r"(^|/)(tests?/|test_[^/]*\.py$|[^/]*_test\.py$)")
_TEST_DEF = re.compile(rb"^\s*(async\s+)?def test_", re.M)


def _get(url: str, timeout: float = 30.0) -> bytes:
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return r.read()


def index_names() -> list[str]:
    """Every project name of PyPI's simple index (normalised)."""
    return re.findall(r'<a href="([^"/]+)/">', _get(INDEX, 300).decode())


def release_facts(name: str, since: str) -> dict | None:
    """The newest release's sdist and facts, when the project is first released on/after `since` and pure."""
    api = f"https://pypi.org/pypi/{name}/json"
    try:
        d = json.loads(_get(api, 20))
    except Exception:  # a vanished or renamed project is not a candidate
        return None
    uploads = [u["upload_time_iso_8601"] for files in d["releases"].values() for u in files]
    sdists = [u for u in d["urls"] if u["packagetype"] == "sdist"]
    pure = any(u["filename"].endswith("py3-none-any.whl") for u in d["urls"])
    if not uploads or min(uploads) < since or not sdists or not pure:
        return None
    reqs = [r for r in d["info"].get("requires_dist") or [] if "extra ==" not in r]
    return {
        "name": name,
        "version": d["info"]["version"],
        "first_release": min(uploads)[:10],
        # a registry mirror may answer with file addresses relative to the API's
        "sdist": urllib.parse.urljoin(api, sdists[0]["url"]),
        "size": sdists[0]["size"],
        "sha256": sdists[0]["digests"]["sha256"],
        "requires": reqs,
        "summary": (d["info"].get("summary") or "")[:80],
    }


def count_tests(facts: dict) -> int:
    """`def test_` functions in the sdist's test files (0 when the archive cannot be read)."""
    try:
        data = _get(facts["sdist"])
        if facts["sdist"].endswith(".zip"):
            z = zipfile.ZipFile(io.BytesIO(data))
            texts = [z.read(n) for n in z.namelist() if n.endswith(".py") and _TEST_FILE.search(n)]
        else:
            t = tarfile.open(fileobj=io.BytesIO(data))
            members = [m for m in t.getmembers() if m.isfile() and m.name.endswith(".py") and _TEST_FILE.search(m.name)]
            texts = [t.extractfile(m).read() for m in members]
    except Exception:  # a broken archive is not a candidate
        return 0
    return sum(len(_TEST_DEF.findall(s)) for s in texts)


def main(argv: list[str] | None = None) -> int:
    """Print corpus YAML entries of the candidates found in a seeded sample of PyPI's names."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sample", type=int, default=3000, help="project names to ask the JSON API about")
    ap.add_argument("--seed", type=int, default=1, help="seed of the name sample")
    ap.add_argument("--names", nargs="+", help="ask about these projects instead of a sample")
    ap.add_argument("--split", default="unseen_2025", help="the split written into the YAML entries")
    ap.add_argument("--since", help="earliest allowed first upload (default 2025-01-01; none with --names)")
    ap.add_argument("--max-deps", type=int, default=0, help="runtime requirements allowed")
    ap.add_argument("--min-tests", type=int, default=20, help="test functions the sdist must hold")
    ap.add_argument("--max-sdist-mb", type=float, default=3.0, help="largest sdist considered")
    ap.add_argument("--threads", type=int, default=32)
    a = ap.parse_args(argv)
    since = a.since or ("" if a.names else "2025-01-01")
    names = a.names or random.Random(a.seed).sample(index_names(), a.sample)
    with ThreadPoolExecutor(a.threads) as pool:
        found = [f for f in pool.map(lambda n: release_facts(n, since), names) if f]
        found = [f for f in found if len(f["requires"]) <= a.max_deps and f["size"] <= a.max_sdist_mb * 2**20]
        tests = list(pool.map(count_tests, found))
    picked = sorted(((n, f) for n, f in zip(tests, found) if n >= a.min_tests), key=lambda nf: (-nf[0], nf[1]["name"]))
    asked = f"{len(names)} named projects" if a.names else f"{a.sample} names (seed {a.seed})"
    print(f"# {len(picked)} candidates of {asked}, first released on/after {since or 'any date'}")
    for n, f in picked:
        print(f"  # first release {f['first_release']}, {n} test functions: {f['summary']}")
        print(f'  - {{name: {f["name"]}, version: "{f["version"]}", sha256: {f["sha256"]}, split: {a.split}}}')
    return 0


if __name__ == "__main__":
    sys.exit(main())
