"""The documentation builds with warnings as errors, and no page cites a file or module that is not in the
repository (README.md and every page under docs/)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
ROOTS = (
    "planact",
    "flows",
    "tasks",
    "graph_planner",
    "aflow_rl",
    "schedulemesh",
    "sandbox",
    "benchmarks",
    "configs",
    "tests",
    "notebooks",
    "deployments",
    "docs",
    "tools",
)
# A cited file has an extension (metric names such as `sandbox/test_runs` and `tasks/s` have none).
PATH = re.compile(
    r"(?<![\w/.-])((?:{})/[\w./-]*\.(?:py|yaml|yml|md|ipynb|sh|toml|json|jsonl|txt))\b".format("|".join(ROOTS))
)
MODULE = re.compile(r"`((?:planact|flows|tasks|graph_planner|aflow_rl|schedulemesh|sandbox)(?:\.\w+)+)")
LINK = re.compile(r"\]\(([^)#\s]+\.md)(?:#[^)]*)?\)")
GENERATED = {"docs/reference/configuration.md", "docs/reference"}
TAGS = {"planact.run_id", "planact.run_name", "planact.registered", "planact.resume_changes"}  # MLflow tags


def pages() -> list[Path]:
    return [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]


def test_the_docs_site_builds_strictly_with_a_generated_config_reference(tmp_path):
    gen = subprocess.run([sys.executable, "docs/gen_config_reference.py"], cwd=REPO, capture_output=True, text=True)
    assert gen.returncode == 0, gen.stderr
    page = (REPO / "docs" / "reference" / "configuration.md").read_text()
    assert "| `max_staleness` |" in page and "| `test_cpu_s` |" in page  # fields from the models
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    out = subprocess.run(
        [str(BIN / "mkdocs"), "build", "--strict", "-d", str(tmp_path / "site")],
        cwd=REPO,
        capture_output=True,
        text=True,
        env=env,
    )
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert (tmp_path / "site" / "results" / "index.html").is_file()


def test_no_page_cites_a_file_or_module_that_is_not_in_the_repository():
    missing = []
    for page in pages():
        text = page.read_text()
        for path in PATH.findall(text):
            path = path.rstrip(".")
            if "<" in path or "*" in path or path in GENERATED:
                continue
            if not (REPO / path).exists():
                missing.append(f"{page.name}: {path}")
        for dotted in MODULE.findall(text):
            if dotted in TAGS:
                continue
            parts = dotted.split(".")
            found = 0
            for i in range(len(parts), 0, -1):
                base = REPO.joinpath(*parts[:i])
                if base.with_suffix(".py").is_file() or (base / "__init__.py").is_file():
                    found = i
                    break
            exported = found == 1 and parts[1] in (REPO / parts[0] / "__init__.py").read_text()  # a package's name
            if found < min(2, len(parts)) and not exported:
                missing.append(f"{page.name}: {dotted}")
        for link in LINK.findall(text):
            if (
                not link.startswith("http")
                and not (page.parent / link).exists()
                and link not in ("reference/configuration.md",)
            ):
                missing.append(f"{page.name}: link {link}")
    assert missing == [], "\n".join(missing)


def test_the_readme_stays_short():
    assert len((REPO / "README.md").read_text().splitlines()) <= 200
