"""`python -m sandbox.describe [--kind code|pytest] [--path DIR ...]`: run a walker inside a sandbox of each
kind and print what it could see (files, listing of a few folders, sys.path, visible processes)."""

from __future__ import annotations

import argparse
import json

from sandbox import process
from sandbox.view import CODE, SITE, pytest_view, python, site_entries

_WALK = r"""
import json, os, sys
out = {}
for top in sorted(os.listdir('/')):
    path = '/' + top
    n = 0
    for root, dirs, files in os.walk(path):
        n += len(files)
        if n > 200000:
            break
    out[path] = n
kids = {p: sorted(os.listdir(p))[:40] for p in ('/opt/planact-site', '/tmp', os.getcwd()) if os.path.isdir(p)}
print(json.dumps({'files_under': out, 'listing': kids, 'sys_path': sys.path,
                  'pids_visible': len([d for d in os.listdir('/proc') if d.isdigit()])}))
"""


def describe(kind: str, paths: tuple[str, ...] = ()) -> dict:
    """Run a walker inside a sandbox of `kind` ('code' or 'pytest') and return what it saw."""
    view = CODE if kind == "code" else pytest_view(paths)
    env = {"PYTHONPATH": SITE} if kind != "code" else {}
    done = process.run([python(), "-s", "-c", _WALK], view=view, env=env, limits=process.Limits(timeout_s=60))
    try:
        seen = json.loads(done.stdout)
    except ValueError:
        seen = {"error": done.status, "stderr": done.stderr[-2000:]}
    return {
        "kind": kind,
        "backend": done.backend,
        "site": [n for n, _ in site_entries(view.packages)],
        "paths": list(view.paths),
        **seen,
    }


def main(argv: list[str] | None = None) -> int:
    """`python -m sandbox.describe [--kind code|pytest] [--path DIR ...]`: print what a sandbox sees."""
    ap = argparse.ArgumentParser(description="Print what a planact sandbox of each kind can see.")
    ap.add_argument("--kind", choices=["code", "pytest", "all"], default="all")
    ap.add_argument("--path", action="append", default=[], help="a folder a pytest sandbox also binds")
    a = ap.parse_args(argv)
    for kind in ["code", "pytest"] if a.kind == "all" else [a.kind]:
        print(json.dumps(describe(kind, tuple(a.path)), indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
