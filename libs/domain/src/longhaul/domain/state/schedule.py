"""``ScheduleState``: the fold of one schedule's log.

The schedule itself (its cron, template and cursor) lives in the ``lh_schedules`` bucket; its
log holds only the ticks that started nothing (``schedule_failed``). The fold knows the last
of them, which is all the ticker decides from: a tick is recorded once, after the last one
recorded.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, ClassVar

import msgspec
from longhaul.domain import events as ev
from longhaul.domain.state.errors import InvalidTransition
from longhaul.domain.state.faults import Fault


class ScheduleState(msgspec.Struct, kw_only=True):
    SCHEMA: ClassVar[int] = 1
    """The shape of this fold: a snapshot of another shape is not read (``snapshots``)."""
    UPGRADES: ClassVar[Mapping[int, Callable[[dict[str, Any]], dict[str, Any]]]] = {}

    schedule_id: str = ""
    last_failed: ev.ScheduleFailed | None = None
    """The last failed tick recorded."""
    faults: list[Fault] = msgspec.field(default_factory=list)
    version: int = 0
    stream_seq: int = 0

    @property
    def exists(self) -> bool:
        return self.version > 0

    @property
    def is_final(self) -> bool:
        return False

    def recorded(self, tick_ms: int) -> bool:
        """Whether the failure of ``tick_ms`` (or of a later tick) is on the log already."""
        return self.last_failed is not None and self.last_failed.tick_ms >= tick_ms

    def check(self, event: ev.Event) -> None:
        """Raise :class:`InvalidTransition` if ``event`` could not apply; changes nothing."""
        if not isinstance(event, ev.ScheduleFailed):
            raise InvalidTransition(f"{event.type} is not a schedule event", code="wrong_aggregate")
        if event.aggregate_id and self.schedule_id and event.aggregate_id != self.schedule_id:
            raise InvalidTransition(
                f"event of {event.aggregate_id} in schedule {self.schedule_id}",
                code="wrong_aggregate",
            )

    def apply(self, event: ev.Event, stream_seq: int = 0) -> None:
        """Apply one event; raises :class:`InvalidTransition` (from :meth:`check`) if it
        cannot happen."""
        self.check(event)
        if isinstance(event, ev.ScheduleFailed):  # the only kind check lets through
            self.schedule_id = event.aggregate_id or self.schedule_id
            self.last_failed = event
        self.version = event.n or self.version + 1
        if stream_seq:
            self.stream_seq = stream_seq
