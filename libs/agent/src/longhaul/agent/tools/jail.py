"""The working-directory jail shared by the file tools and the Guardrail.

Three ways out are refused, each with a message that tells the model what to do instead:
absolute paths, ``..`` components, and symlinks whose target lies outside the root. The check
resolves symlinks of every existing component, so a link placed inside the jail that points
at ``/etc`` is caught as well.
"""

from __future__ import annotations

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
    resolved = (base / pure).resolve()
    if not resolved.is_relative_to(base):
        raise ToolError(
            f"path {path!r} refused: it resolves through a symlink to a place outside the "
            "working directory",
            code=OUTSIDE,
        )
    return resolved


def inside(root: Path, candidate: Path) -> bool:
    """Whether an existing path (e.g. a glob match) really lies in ``root`` after symlinks."""
    return candidate.resolve().is_relative_to(root.resolve())


def relative(root: Path, path: Path) -> str:
    return path.resolve().relative_to(root.resolve()).as_posix() or "."
