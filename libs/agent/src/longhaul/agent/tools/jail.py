"""The working-directory jail shared by the file tools and the Guardrail.

Four ways out are refused, each with a message that tells the model what to do instead:
absolute paths, ``..`` components, symlinks whose target lies outside the root, and hard
links. The check resolves symlinks of every existing component, so a link placed inside the
jail that points at ``/etc`` is caught as well. A hard link has no target to check: a file
with more than one name may have its other name anywhere (``ln /etc/passwd x``), so every
multiply-linked file is refused.
"""

from __future__ import annotations

import stat
from pathlib import Path, PurePosixPath

from longhaul.agent.errors import ToolError

OUTSIDE = "path_outside_workdir"


def jailed(root: Path, path: str) -> Path:
    """``path`` resolved inside ``root``; raises :class:`ToolError` (``path_outside_workdir``)."""
    if not path or not path.strip():
        raise ToolError("empty path", code="tool_call_invalid")
    pure = PurePosixPath(path)
    if pure.is_absolute() or path.startswith("~"):
        raise ToolError(
            f"absolute path {path!r} refused: use a path relative to the working directory",
            code=OUTSIDE,
        )
    if ".." in pure.parts:
        raise ToolError(
            f"path {path!r} refused: '..' may not leave the working directory", code=OUTSIDE
        )
    base = root.resolve()
    try:
        resolved = (base / pure).resolve()
    except OSError as exc:  # a link changing while it is followed
        raise ToolError(
            f"path {path!r} changed while it was checked: {exc.strerror}", code=OUTSIDE
        ) from None
    if not resolved.is_relative_to(base):
        raise ToolError(
            f"path {path!r} refused: it resolves through a symlink to a place outside the "
            "working directory",
            code=OUTSIDE,
        )
    if _hard_linked(resolved):
        raise ToolError(
            f"path {path!r} refused: it is a hard link (the file has other names, possibly "
            "outside the working directory); copy the content into a new file instead",
            code=OUTSIDE,
        )
    return resolved


def _hard_linked(path: Path) -> bool:
    try:
        info = path.stat()
    except OSError:
        return False
    return stat.S_ISREG(info.st_mode) and info.st_nlink > 1


def inside(root: Path, candidate: Path) -> bool:
    """Whether an existing path (e.g. a glob match) really lies in ``root`` after symlinks
    and is not a hard link."""
    resolved = candidate.resolve()
    return resolved.is_relative_to(root.resolve()) and not _hard_linked(resolved)


def relative(root: Path, path: Path) -> str:
    return path.resolve().relative_to(root.resolve()).as_posix() or "."
