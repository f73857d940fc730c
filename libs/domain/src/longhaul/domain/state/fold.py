"""``Fold``: what every aggregate's state offers the write path.

The repository (``longhaul.core.repository``) loads a fold, asks it whether an event may
apply (:meth:`Fold.check`, which never changes the state), appends the event at the fold's
position (``stream_seq``) and applies it. :class:`~longhaul.domain.state.TraceState` and
:class:`~longhaul.domain.state.TaskState` both implement it.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from longhaul.domain import events as ev


@runtime_checkable
class Fold(Protocol):
    """A pure, snapshot-serialisable fold of one aggregate's events."""

    version: int
    """``n`` of the last applied event (0 for an aggregate that does not exist yet)."""
    stream_seq: int
    """Stream sequence of the last applied event: the optimistic-concurrency token."""

    @property
    def exists(self) -> bool: ...

    @property
    def is_final(self) -> bool: ...

    def apply(self, event: ev.Event, stream_seq: int = 0) -> None:
        """Apply one event; raises :class:`InvalidTransition` if it cannot happen."""
        ...

    def check(self, event: ev.Event) -> None:
        """Raise :class:`InvalidTransition` if ``event`` could not apply; changes nothing."""
        ...
