"""Where a trace works: below the working root, in its API key's own directory.

A trace filed under an owner (every trace a client made through the gateway, its sub-traces
and a task's step traces) works in ``<root>/keys/<owner>/<scope>``: ``owner`` is the key's
stable, non-secret id (``k_`` + a digest prefix, never the key), ``scope`` the task's id for a
task's phases, else the id of the top-most trace, so a task's phases and a trace's sub-traces
share one directory and no key ever sees another's. ``config.working_dir`` is resolved inside
that directory. A trace with no owner (written to the log directly, not through the gateway)
works in ``<root>/unowned/<scope>``: never the root itself, which as root the sandbox would
hand (keys' directories and all) to the tools' user.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Protocol

from longhaul.agent.errors import TurnConfigError

KEYS_DIR = "keys"
UNOWNED_DIR = "unowned"
"""Beside ``keys``, so no key's id can name it."""
_SAFE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}")


class WorkingDirError(TurnConfigError):
    """The trace asks for a directory outside the directory it may use."""


class Placed(Protocol):
    """What decides a trace's directory (a ``TraceState`` has it)."""

    @property
    def trace_id(self) -> str: ...
    @property
    def owner(self) -> str | None: ...
    @property
    def task_id(self) -> str | None: ...
    @property
    def root_trace_id(self) -> str | None: ...


def trace_home(root: Path, trace: Placed) -> Path:
    """The directory a trace's working directory must lie in (not created)."""
    scope = trace.task_id or trace.root_trace_id or trace.trace_id
    if not trace.owner:
        return _below(root / UNOWNED_DIR, [scope])
    return key_home(root, trace.owner, scope)


def key_home(root: Path, owner: str, scope: str | None = None) -> Path:
    """The directory of ``scope`` (a top-most trace's or a task's id) under ``owner``'s, or
    ``owner``'s own without a scope."""
    return _below(root / KEYS_DIR, [owner] if scope is None else [owner, scope])


def _below(base: Path, parts: list[str]) -> Path:
    for part in parts:
        if not _SAFE.fullmatch(part):
            raise WorkingDirError(f"cannot place a working directory under {part!r}")
    return base.joinpath(*parts)


def resolve_working_dir(root: Path, requested: str | None, home: Path | None = None) -> Path:
    """``home`` (default ``root``) itself by default; a relative ``requested`` lives under
    it; an absolute one must already be inside it. The directory is created."""
    base = (home or root).resolve()
    if not requested:
        target = base
    else:
        target = (base / requested).resolve()
        if not target.is_relative_to(base):
            raise WorkingDirError(
                f"working_dir {requested!r} is outside this trace's working directory {base}"
            )
    target.mkdir(parents=True, exist_ok=True)
    return target


def trace_working_dir(root: Path, trace: Placed, requested: str | None) -> Path:
    """The trace's working directory (created): ``requested`` inside its key's home."""
    home = trace_home(root.resolve(), trace)
    return resolve_working_dir(root, requested, home)
