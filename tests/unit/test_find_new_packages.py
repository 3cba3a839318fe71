"""tools/find_new_packages.py keeps only projects first released on/after the date, pure, with tests
(PyPI's JSON answers are given as documents here: the unit suite does not reach the network)."""

from __future__ import annotations

import io
import json
import tarfile

from tests.unit.tool_module import load_tool


def _tool():
    return load_tool("find_new_packages")


def _project(uploads: list[str], wheel: str = "p-1.0-py3-none-any.whl", reqs=None) -> bytes:
    files = [{"upload_time_iso_8601": u} for u in uploads]
    urls = [
        {
            "packagetype": "sdist",
            "filename": "p-1.0.tar.gz",
            "url": "https://x/p-1.0.tar.gz",
            "size": 9000,
            "digests": {"sha256": "ab" * 32},
        },
        {"packagetype": "bdist_wheel", "filename": wheel},
    ]
    info = {"version": "1.0", "requires_dist": reqs, "summary": "a package"}
    return json.dumps({"info": info, "releases": {"0.1": files[:1], "1.0": files[1:]}, "urls": urls}).encode()


def test_only_projects_with_no_release_before_the_date_that_ship_a_pure_wheel_are_candidates(monkeypatch):
    tool = _tool()
    answers = {
        "new": _project(["2025-03-01T00:00:00Z", "2026-01-02T00:00:00Z"], reqs=["attrs", "pytest; extra == 'test'"]),
        "old": _project(["2024-12-31T23:00:00Z", "2026-01-02T00:00:00Z"]),
        "compiled": _project(["2025-03-01T00:00:00Z", "2025-04-01T00:00:00Z"], wheel="p-1.0-cp311-linux.whl"),
    }
    monkeypatch.setattr(tool, "_get", lambda url, timeout=30.0: answers[url.split("/")[-2]])
    new = tool.release_facts("new", "2025-01-01")
    assert new["first_release"] == "2025-03-01" and new["sha256"] == "ab" * 32 and new["requires"] == ["attrs"]
    assert tool.release_facts("old", "2025-01-01") is None
    assert tool.release_facts("compiled", "2025-01-01") is None


def test_test_functions_are_counted_in_the_sdists_test_files_only(monkeypatch):
    tool = _tool()
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as t:
        for name, text in {
            "p-1.0/tests/test_a.py": "def test_one():\n    pass\n\nasync def test_two():\n    pass\n",
            "p-1.0/p/core.py": "def test_not_a_test():\n    pass\n",
        }.items():
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            t.addfile(info, io.BytesIO(data))
    monkeypatch.setattr(tool, "_get", lambda url, timeout=30.0: buf.getvalue())
    assert tool.count_tests({"sdist": "https://x/p-1.0.tar.gz"}) == 2


def test_a_mirrors_relative_sdist_address_is_joined_to_the_api_address(monkeypatch):
    # a registry mirror answered "../../packages/..." here; read as-is, every sdist counted 0 tests
    tool = _tool()
    doc = json.loads(_project(["2025-03-01T00:00:00Z", "2026-01-02T00:00:00Z"]))
    doc["urls"][0]["url"] = "../../packages/ab/cd/p-1.0.tar.gz"
    monkeypatch.setattr(tool, "_get", lambda url, timeout=30.0: json.dumps(doc).encode())
    assert tool.release_facts("p", "")["sdist"] == "https://pypi.org/packages/ab/cd/p-1.0.tar.gz"
