"""The agents' working files in a backup: one tar of the working root (``work.tar``).

Taken while agents may be writing: each file is copied whole first (so a file that changes
size under the reader can never break the archive) and stored at the size it had then; a
file that cannot be read is named in the manifest, never silently left out. Symbolic links
are kept as links and never followed. Extracting goes through tarfile's ``data`` filter: no
member lands outside the working root and none is a device; a link pointing outside (an
agent may make one) is skipped and named.
"""

from __future__ import annotations

import os
import shutil
import tarfile
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from longhaul.core.backup import Progress, Silent, file_entry

SPOOL_BYTES = 8 * 1024 * 1024


@dataclass
class Archived:
    files: int = 0
    bytes: int = 0
    skipped: list[str] = field(default_factory=list)


def _total(root: Path, exclude: Path | None) -> int:
    total = 0
    for folder, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if exclude is None or Path(folder, d) != exclude]
        for name in files:
            try:
                total += os.lstat(os.path.join(folder, name)).st_size
            except OSError:
                pass
    return total


def archive(
    root: Path, target: Path, *, exclude: Path | None = None, progress: Progress | None = None
) -> Archived:
    """Write every file, folder and link under ``root`` (but ``exclude``, the backup's own
    directory when it lies inside) into the tar ``target`` (mode 0600)."""
    progress = progress or Silent()
    root = root.resolve()
    exclude = exclude.resolve() if exclude is not None else None
    done = Archived()
    progress.begin(f"working files in {root}", _total(root, exclude))
    fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with (
        os.fdopen(fd, "wb") as out,
        tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT) as tar,
    ):
        for folder, dirs, files in os.walk(root):
            dirs[:] = sorted(d for d in dirs if Path(folder, d) != exclude)
            for name in [*dirs, *sorted(files)]:
                path = Path(folder, name)
                arcname = str(path.relative_to(root))
                try:
                    size = _add(tar, path, arcname)
                except OSError as exc:
                    done.skipped.append(f"{arcname}: {exc.strerror or exc}")
                    continue
                done.files += name in files
                done.bytes += size
                progress.advance(size)
    progress.end(f"working files: {done.files} files")
    return done


def _add(tar: tarfile.TarFile, path: Path, arcname: str) -> int:
    info = tar.gettarinfo(str(path), arcname)
    if info is None:  # a socket or another kind tar cannot hold
        return 0
    if not info.isreg():
        tar.addfile(info)
        return 0
    with path.open("rb") as source, tempfile.SpooledTemporaryFile(SPOOL_BYTES) as copy:
        shutil.copyfileobj(source, copy)
        info.size = copy.tell()
        copy.seek(0)
        tar.addfile(info, copy)
    return info.size


def extract(archive_path: Path, root: Path, *, progress: Progress | None = None) -> Archived:
    """Unpack a backup's working files into ``root`` (files it does not hold stay)."""
    progress = progress or Silent()
    root.mkdir(parents=True, exist_ok=True)
    done = Archived()
    progress.begin(f"working files into {root}", archive_path.stat().st_size)

    def checked(member: tarfile.TarInfo, dest: str) -> tarfile.TarInfo | None:
        try:
            kept = tarfile.data_filter(member, dest)
        except tarfile.FilterError as exc:
            done.skipped.append(f"{member.name}: {exc}")
            return None
        if kept.isreg():
            done.files += 1
            done.bytes += kept.size
            progress.advance(kept.size)
        return kept

    with tarfile.open(archive_path, mode="r") as tar:
        tar.extractall(root, filter=checked)
    progress.end(f"working files: {done.files} files")
    return done


def manifest_entry(target: Path, archived: Archived, root: Path) -> dict[str, Any]:
    """The manifest's ``workdir``: where the files came from, the archive's size and
    SHA-256, and what could not be read."""
    return {
        "root": str(root),
        **file_entry(target),
        "files": archived.files,
        "skipped": archived.skipped,
    }
