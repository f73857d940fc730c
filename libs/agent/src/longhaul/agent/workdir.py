"""Where a trace works: ``config.working_dir`` resolved inside the executor's working root."""

from __future__ import annotations

from pathlib import Path

from longhaul.agent.errors import TurnConfigError


class WorkingDirError(TurnConfigError):
    """The trace asks for a directory outside the working root."""


def resolve_working_dir(root: Path, requested: str | None) -> Path:
    """``root`` itself by default (sub-traces share their parent's directory); a relative
    ``requested`` lives under it; an absolute one must already be inside it."""
    base = root.resolve()
    if not requested:
        target = base
    else:
        target = (base / requested).resolve()
        if not target.is_relative_to(base):
            raise WorkingDirError(
                f"working_dir {requested!r} is outside the executor's working root {base}"
            )
    target.mkdir(parents=True, exist_ok=True)
    return target
