"""``EventLog``: the recorder's surface, as the code that reads and writes events sees it.

Implemented by :class:`~longhaul.core.store.EventStore` (JetStream) and by
:class:`~longhaul.core.memory.MemoryStore` (in memory, for unit tests of what services
decide); one conformance suite runs over both. Folding lives in the repository.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Sequence
from typing import Protocol

from longhaul.core.store import EventPage, Position, Recorded
from longhaul.domain import events as ev
from longhaul.domain.events import Aggregate, Unreadable


class InFlight(Protocol):
    """An append published but not yet acknowledged (:meth:`EventLog.begin_append`)."""

    events: list[ev.Event]
    """The events as stamped for the log (their ``n``)."""

    async def settle(self) -> list[Recorded]:
        """The stored records; :class:`ConcurrencyError` if the aggregate moved first."""
        ...


class EventLog(Protocol):
    @property
    def atomic(self) -> bool:
        """Whether several events appended at once are stored all or none (one batch)."""
        ...

    async def append(
        self,
        aggregate: Aggregate,
        aggregate_id: str,
        events: Sequence[ev.Event],
        *,
        expected: Position,
        actor: str | None = None,
        causation_id: str | None = None,
        correlation_id: str | None = None,
    ) -> list[Recorded]:
        """Append in order after ``expected``, all or none when :attr:`atomic`;
        :class:`ConcurrencyError` if the aggregate moved past it."""
        ...

    async def begin_append(
        self,
        aggregate: Aggregate,
        aggregate_id: str,
        events: Sequence[ev.Event],
        *,
        expected: Position,
        actor: str | None = None,
        causation_id: str | None = None,
        correlation_id: str | None = None,
    ) -> InFlight:
        """Publish ``events`` (one batch) after ``expected`` and return before the server
        answers."""
        ...

    def replay(
        self, aggregate: Aggregate, aggregate_id: str, *, after: int = 0
    ) -> AsyncGenerator[Recorded, None]: ...

    def watch(
        self, aggregate: Aggregate, aggregate_id: str, *, after: int = 0
    ) -> AsyncGenerator[Recorded, None]:
        """Closed by its reader (``aclose``): a live watch holds a subscription."""
        ...

    async def exists(self, aggregate: Aggregate, aggregate_id: str) -> bool: ...

    async def last_position(self, aggregate: Aggregate, aggregate_id: str) -> Position: ...

    async def first(self, aggregate: Aggregate, aggregate_id: str) -> Recorded | Unreadable | None:
        """The aggregate's first stored item (its creation), or None when it has none."""
        ...

    async def last_type(self, aggregate: Aggregate, aggregate_id: str) -> str | None:
        """The type of the aggregate's last event, or None when it has none."""
        ...

    async def counts(self, aggregate: Aggregate, event_type: str) -> dict[str, int]:
        """How many ``event_type`` events each aggregate of the kind holds, by id."""
        ...

    async def read_page(
        self, aggregate: Aggregate, aggregate_id: str, *, after: int, with_seqs: bool = False
    ) -> EventPage:
        """The next batch after ``after``, undecodable payloads included, for a fold."""
        ...
