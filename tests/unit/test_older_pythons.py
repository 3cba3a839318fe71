"""What differs between the Python releases planact runs on (3.10 and later; the Makefile makes .venv from Debian
12's 3.11.2 where it has one). Unpacking an sdist: planact's own check of every member's text on every Python,
tarfile's "data" filter beside it where the Python has one; an archive that would write or point outside its
folder is refused before anything is written. A null byte in model-written text: a SyntaxError wherever
graph_planner parses."""

from __future__ import annotations

import io
import os
import shutil
import tarfile
import tempfile
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


def _past_path_max() -> list[tarfile.TarInfo]:
    """Review 19's escape from the data filter (the CVE-2025-4517 class): links to 247-character folders push
    the resolved path past PATH_MAX, where `os.path.realpath` stops following links, so a link whose text climbs
    back up looks inside to the filter while the kernel lands three folders above the archive's root."""
    letters, deep, path, out = "abcdefghijklmnop", "d" * 247, "pkg-1.0", []
    for c in letters:
        folder = tarfile.TarInfo(f"{path}/{deep}")
        folder.type = tarfile.DIRTYPE
        out += [folder, _link(f"{path}/{c}", deep)]
        path = f"{path}/{deep}"
    back = "pkg-1.0/" + "/".join(letters) + "/" + "l" * 254
    out += [_link(back, "../" * len(letters)), _link("pkg-1.0/escape", back[8:] + "/../../../outside")]
    return [*out, _file("pkg-1.0/escape/PWNED")]


ESCAPES = {
    "an absolute name": [_file("/tmp/planact-unpack-escape")],
    "a name that climbs out": [_file("pkg-1.0/../../planact-unpack-escape")],
    "a link to an absolute path": [_link("pkg-1.0/etc", "/etc")],
    "a link that climbs out": [_link("pkg-1.0/up", "../..")],
    "a link up to the archive's root, above the kept folder": [_link("pkg-1.0/dot/up", "../..")],
    "a hard link out": [_link("pkg-1.0/passwd", "../../etc/passwd", tarfile.LNKTYPE)],
    "a device": [_link("pkg-1.0/null", "", tarfile.CHRTYPE)],
    "links past PATH_MAX, then a file through them": _past_path_max(),
}


# Links whose target is absolute or climbs are left out (an honest sdist's docs link to ../CHANGES among them);
# the archive is refused for the rest.
LEFT_OUT = {
    "a link to an absolute path",
    "a link that climbs out",
    "a link up to the archive's root, above the kept folder",
    "a hard link out",
}  # the PATH_MAX chain is refused: its folders' names pass 1,024 characters


@pytest.mark.parametrize("attack", ESCAPES)
def test_an_archive_reaching_outside_its_folder_is_refused_or_unpacked_without_the_link(
    tmp_path, monkeypatch, python_kind, attack
):
    """Refused on either path, with nothing written outside: not the kept folder, not the folder above the
    temporary one it is unpacked in (where the PATH_MAX chain lands). A short temporary path, so that the
    chain's folders can be made and only the resolved link passes PATH_MAX (as on a machine with /tmp)."""
    short = Path(tempfile.mkdtemp(prefix="pu", dir="/tmp"))
    try:
        (short / "t").mkdir()
        (short / "outside").mkdir()  # where the PATH_MAX chain lands: three folders above the package's
        monkeypatch.setattr(tempfile, "tempdir", str(short / "t"))
        dest, refused = tmp_path / "src", None
        try:
            unpack(_sdist(tmp_path / "evil.tar.gz", *ESCAPES[attack]), dest)
        except Exception as e:  # noqa: BLE001 - which error is asserted below, after what was written
            refused = e
        assert not any((short / "outside").iterdir())  # nothing written through the chain
        if attack in LEFT_OUT:  # unpacked without the link: every link left points down
            assert refused is None and (dest / "pkg" / "__init__.py").is_file()
            links = [os.readlink(p) for p in dest.rglob("*") if p.is_symlink()]
            assert links == ["pkg"] and not (dest / "passwd").exists() and not (dest / "escape").is_symlink()
        else:
            assert isinstance(refused, ValueError) and not dest.exists(), refused
    finally:
        shutil.rmtree(short)
    assert not Path("/tmp/planact-unpack-escape").exists() and not (tmp_path.parent / "planact-unpack-escape").exists()


def test_a_null_byte_in_model_text_is_a_syntax_error_on_every_python():
    """Python 3.11.2's parser raises ValueError for a null byte, later ones SyntaxError: graph_planner's one
    parse entry point makes it a SyntaxError, so every caller's `except SyntaxError` holds on both."""
    from graph_planner.candidates import function_text
    from graph_planner.pyparse import parse

    with pytest.raises(SyntaxError):
        parse("def f():\n    return 1\x00\n")
    assert function_text("def f():\n    return 1\x00\n", "f") is None
