"""What differs between the Python releases planact runs on (3.10 and later; the Makefile makes .venv from Debian
12's 3.11.2 where it has one). Unpacking an sdist: tarfile's "data" filter where the Python has it, planact's own
check where it does not; both refuse an archive that would write or point outside its folder, before anything is
kept. A null byte in model-written text: a SyntaxError wherever graph_planner parses."""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

import pytest

from graph_planner.corpus.fetch import unpack


def _sdist(path: Path, *extra: tarfile.TarInfo) -> Path:
    with tarfile.open(path, "w:gz") as t:
        for name, text in (("pkg-1.0/setup.py", b"print(1)\n"), ("pkg-1.0/pkg/__init__.py", b"X = 1\n")):
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(text), 0o4777  # set-id and world-writable bits: cleared on the way out
            t.addfile(info, io.BytesIO(text))
        link = tarfile.TarInfo("pkg-1.0/here")
        link.type, link.linkname = tarfile.SYMTYPE, "pkg"  # a link that points down: kept
        t.addfile(link)
        for info in extra:
            t.addfile(info, io.BytesIO(b"x" * info.size))
    return path


def _link(name: str, target: str, kind: bytes = tarfile.SYMTYPE) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type, info.linkname = kind, target
    return info


def _file(name: str) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.size = 1
    return info


@pytest.fixture(params=["data filter", "own check"])
def python_kind(request, monkeypatch):
    if request.param == "own check":
        monkeypatch.delattr(tarfile, "data_filter", raising=False)
    elif not hasattr(tarfile, "data_filter"):
        pytest.skip("this Python has no tarfile filters")
    return request.param


def test_an_honest_sdist_unpacks_with_its_link_and_no_set_id_bits(tmp_path, python_kind):
    dest = unpack(_sdist(tmp_path / "pkg-1.0.tar.gz"), tmp_path / "src")
    assert (dest / "pkg" / "__init__.py").read_text() == "X = 1\n"
    assert (dest / "here").is_symlink() and (dest / "here" / "__init__.py").is_file()
    assert (dest / "setup.py").stat().st_mode & 0o7022 == 0


ESCAPES = {
    "an absolute name": _file("/tmp/planact-unpack-escape"),
    "a name that climbs out": _file("pkg-1.0/../../planact-unpack-escape"),
    "a link to an absolute path": _link("pkg-1.0/etc", "/etc"),
    "a link that climbs out": _link("pkg-1.0/up", "../.."),
    "a link to the folder, then a link up through it": _link("pkg-1.0/dot/up", "../.."),
    "a hard link out": _link("pkg-1.0/passwd", "../../etc/passwd", tarfile.LNKTYPE),
    "a device": _link("pkg-1.0/null", "", tarfile.CHRTYPE),
}


@pytest.mark.parametrize("attack", ESCAPES)
def test_an_archive_reaching_outside_its_folder_is_refused_or_kept_inside(tmp_path, python_kind, attack):
    """Refused (ValueError or tarfile's own error), or unpacked with the member inside: never a write or a link
    outside the folder (the data filter strips an absolute name's leading slash instead of refusing it)."""
    archive = _sdist(tmp_path / "evil.tar.gz", ESCAPES[attack])
    dest = tmp_path / "src"
    try:
        unpack(archive, dest)
    except (ValueError, tarfile.TarError):
        assert not dest.exists()
    else:
        assert python_kind == "data filter" and attack in ("an absolute name", "a device") or not attack
        links = [p for p in dest.rglob("*") if p.is_symlink()]
        assert all(p.resolve().is_relative_to(dest.resolve()) for p in links)
    assert not Path("/tmp/planact-unpack-escape").exists() and not (tmp_path.parent / "planact-unpack-escape").exists()


def test_a_null_byte_in_model_text_is_a_syntax_error_on_every_python():
    """Python 3.11.2's parser raises ValueError for a null byte, later ones SyntaxError: graph_planner's one
    parse entry point makes it a SyntaxError, so every caller's `except SyntaxError` holds on both."""
    from graph_planner.candidates import function_text
    from graph_planner.pyparse import parse

    with pytest.raises(SyntaxError):
        parse("def f():\n    return 1\x00\n")
    assert function_text("def f():\n    return 1\x00\n", "f") is None
