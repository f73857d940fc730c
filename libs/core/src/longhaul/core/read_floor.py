"""Read what woke you: a handler's fold of the aggregate it was woken for includes that event.

Every replica of a replicated stream answers direct gets, and one that is catching up (after
a restart, a lost route) answers from behind the leader. A planner woken by a step trace's
``completed`` that folds the trace from such a replica sees it still running, decides there
is nothing to do and acknowledges: the task waits forever. nats-server cannot yet be asked for
a minimum last sequence on a direct get (the "read-after-write" design's ``min_last_seq`` has
an error code but no implementation in 2.15), so the consumer loop records the position of
the event it hands over (:func:`reading_after`) and :meth:`Repository.load` reads again until
its fold reaches that position, raising :class:`StaleRead` (a transient broker error: the
handler is retried in place) when a replica stays behind.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextvars import ContextVar
from dataclasses import dataclass


class StaleRead(Exception):
    """A replica answered from before the event being handled, and stayed behind."""


@dataclass(frozen=True, slots=True)
class ReadFloor:
    """The handled event's place: reads of this aggregate must reach ``stream_seq``."""

    aggregate: str
    aggregate_id: str
    stream_seq: int


_floor: ContextVar[ReadFloor | None] = ContextVar("longhaul_read_floor", default=None)


@contextlib.contextmanager
def reading_after(aggregate: str, aggregate_id: str, stream_seq: int) -> Iterator[None]:
    """Within this block (and the tasks it starts), folds of the aggregate include the
    event at ``stream_seq``."""
    token = _floor.set(ReadFloor(aggregate, aggregate_id, stream_seq))
    try:
        yield
    finally:
        _floor.reset(token)


def floor_for(aggregate: str, aggregate_id: str) -> int:
    """The position a fold of this aggregate must reach here (0: no requirement)."""
    floor = _floor.get()
    if floor is None or floor.aggregate_id != aggregate_id or floor.aggregate != aggregate:
        return 0
    return floor.stream_seq
