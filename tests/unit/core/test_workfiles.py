"""The working files in a backup (``longhaul.core.workfiles``): everything under the working
root comes back, links as links; the backup's own directory inside the root is left out; and
an archive cannot write outside the root it is unpacked into (a link an agent pointed at
``/etc``, a member named ``../``)."""

from __future__ import annotations

import io
import os
import tarfile
from pathlib import Path

from longhaul.core.workfiles import archive, extract


def test_the_files_come_back_and_the_backup_is_not_in_its_own_archive(tmp_path: Path) -> None:
    root = tmp_path / "work"
    trace = root / "keys" / "k_1" / "t_1"
    (trace / "notes").mkdir(parents=True)
    (trace / "notes" / "a.txt").write_text("A")
    (trace / "empty").mkdir()
    os.symlink("notes/a.txt", trace / "inside")
    os.symlink("/etc/passwd", trace / "outside")
    backup = root / "backup"  # the operator put the backup under the working root
    backup.mkdir()
    (backup / "LH_EVENTS.tar.s2").write_bytes(b"x")

    archived = archive(root, backup / "work.tar", exclude=backup)
    assert archived.skipped == []
    restored = tmp_path / "restored"
    unpacked = extract(backup / "work.tar", restored)

    again = restored / "keys" / "k_1" / "t_1"
    assert (again / "notes" / "a.txt").read_text() == "A"
    assert (again / "empty").is_dir()
    assert os.readlink(again / "inside") == "notes/a.txt"
    assert not (again / "outside").exists() and not (again / "outside").is_symlink()
    assert [s.split(":")[0] for s in unpacked.skipped] == ["keys/k_1/t_1/outside"]
    assert not (restored / "backup").exists()


def test_an_archive_cannot_write_outside_the_root(tmp_path: Path) -> None:
    forged = tmp_path / "work.tar"
    with tarfile.open(forged, "w") as tar:
        for name in ("../escaped.txt", "/abs.txt", "kept.txt"):
            member = tarfile.TarInfo(name)
            member.size = 1
            tar.addfile(member, io.BytesIO(b"x"))
    root = tmp_path / "deep" / "root"
    unpacked = extract(forged, root)
    assert not (tmp_path / "deep" / "escaped.txt").exists()
    assert not Path("/abs.txt").exists()
    assert (root / "kept.txt").read_text() == "x"
    assert len(unpacked.skipped) == 1  # "../": refused; "/abs.txt": made relative
    assert (root / "abs.txt").exists()


def test_a_link_already_in_the_root_does_not_carry_a_restore_outside(tmp_path: Path) -> None:
    """``restore --replace`` unpacks over a working root an agent may have left links in."""
    source = tmp_path / "source"
    (source / "t" / "notes").mkdir(parents=True)
    (source / "t" / "notes" / "a.txt").write_text("A")
    (source / "t" / "b.txt").write_text("B")
    archive(source, tmp_path / "work.tar")
    outside = tmp_path / "outside"
    outside.mkdir()
    root = tmp_path / "root"
    (root / "t").mkdir(parents=True)
    os.symlink(outside, root / "t" / "notes")
    os.symlink(outside / "b.txt", root / "t" / "b.txt")
    unpacked = extract(tmp_path / "work.tar", root)
    assert list(outside.iterdir()) == []
    skipped = sorted(s.split(":")[0] for s in unpacked.skipped)
    assert skipped == ["t/b.txt", "t/notes", "t/notes/a.txt"]
