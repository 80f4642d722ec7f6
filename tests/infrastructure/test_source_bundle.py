"""The training code archive is deterministic: same code, same bytes; changed code, different hash."""

from __future__ import annotations

import hashlib
import os
import shutil
import tarfile
from pathlib import Path

import pytest

from stacks.source_bundle import pack_members, pack_source_dir
from stacks.source_layout import bundle_members

from .synthesis import PROJECT_ROOT


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _copy_of_training_code(destination: Path) -> Path:
    return Path(shutil.copytree(PROJECT_ROOT / "training_code", destination,
                                ignore=shutil.ignore_patterns("__pycache__", "*.pyc")))


def test_same_code_packs_to_identical_bytes_whatever_the_file_times(tmp_path: Path) -> None:
    # Given two copies of training_code/ whose files carry different modification times
    first, second = _copy_of_training_code(tmp_path / "a"), _copy_of_training_code(tmp_path / "b")
    for path in second.rglob("*"):
        os.utime(path, (1_000_000, 1_000_000))
    # When both are packed
    # Then the archives are byte-identical
    first_hash = _sha256(pack_source_dir(first, tmp_path / "a.tar.gz"))
    assert first_hash == _sha256(pack_source_dir(second, tmp_path / "b.tar.gz"))


def test_a_changed_file_changes_the_hash(tmp_path: Path) -> None:
    source = _copy_of_training_code(tmp_path / "code")
    before = _sha256(pack_source_dir(source, tmp_path / "before.tar.gz"))
    # Given one changed byte in one file
    changed = sorted(source.rglob("*.py"))[0]
    changed.write_text(changed.read_text() + "\n")
    # When packed again / Then the hash differs
    assert _sha256(pack_source_dir(source, tmp_path / "after.tar.gz")) != before


def test_contents_sit_at_the_archive_root_sorted_with_fixed_metadata_and_no_caches(tmp_path: Path) -> None:
    # Given a source folder with a package, a bytecode cache and a Dockerfile
    source = tmp_path / "src"
    (source / "pkg" / "__pycache__").mkdir(parents=True)
    (source / "train.py").write_text("print('hi')\n")
    (source / "pkg" / "__init__.py").write_text("")
    (source / "pkg" / "__pycache__" / "x.cpython-311.pyc").write_bytes(b"\0")
    (source / "Dockerfile").write_text("FROM scratch\n")
    # When packed
    with tarfile.open(pack_source_dir(source, tmp_path / "out.tar.gz")) as archive:
        members = archive.getmembers()
    # Then entries are root-relative, sorted, metadata fixed, caches and the Dockerfile left out
    assert [member.name for member in members] == ["pkg/__init__.py", "train.py"]
    assert {(member.mtime, member.uid, member.gid, member.uname) for member in members} == {(0, 0, 0, "")}
    assert (tmp_path / "out.tar.gz").read_bytes()[4:8] == b"\0\0\0\0"  # gzip header mtime


@pytest.mark.parametrize("tracking", [True, False])
def test_a_tracked_bundle_installs_the_tracking_file_and_an_untracked_one_does_not(tmp_path: Path, tracking) -> None:
    # Given a source folder with its own requirements
    source = tmp_path / "src"
    source.mkdir()
    (source / "train.py").write_text("print('hi')\n")
    (source / "requirements.txt").write_text("lightning==2.6.6\n")
    # When packed for a stack that tracks experiments, or one that does not
    with tarfile.open(pack_members(bundle_members(source, tracking=tracking), tmp_path / "out.tar.gz")) as archive:
        files = {member.name: archive.extractfile(member).read() for member in archive.getmembers()}
        modes = {member.mode for member in archive.getmembers()}
    # Then only the tracked one names the tracking file, which it carries; the user's line is kept either way
    tracking_file = PROJECT_ROOT / "training_code" / "requirements-tracking.txt"
    if tracking:
        assert files["requirements.txt"].splitlines()[0] == b"lightning==2.6.6"
        assert files["requirements.txt"].splitlines()[-1] == b"-r requirements-tracking.txt"
        assert files["requirements-tracking.txt"] == tracking_file.read_bytes()
    else:
        assert files == {"requirements.txt": b"lightning==2.6.6\n", "train.py": b"print('hi')\n"}
    assert modes == {0o644}
