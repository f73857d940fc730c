"""A tick that started nothing, recorded on the log: ``schedule_failed`` on the schedule's
own aggregate (``lh.ev.schedule.<id>.schedule_failed``), which the notifier's consumer turns
into ``schedule.failed`` notices.

Once per (schedule, tick), whoever ticks: the ticker handles a schedule's ticks in order and
moves its cursor only after the event is stored, so the tick being recorded is at or after
the last one on the log. The schedule's log is folded (its last failed tick,
:class:`~longhaul.domain.state.ScheduleState`) and, when that is not already this tick's, the
new one is appended at the fold's position: a gateway that crashed before moving the cursor
finds its event there, and of two gateways at the same tick one appends and the other is
refused by the expected sequence.

Not every failed tick is news: a schedule whose template keeps failing would otherwise write
(and notify) once per tick for ever. The schedule's record counts the failed ticks in a row;
only the first of them, one whose reason (error code) differs from the last, and the one that
pauses the schedule (``gateway.schedule_pause_after_failures`` in a row) are written. The
count moves with the cursor (one compare-and-set), so it too is exactly once per tick.
"""

from __future__ import annotations

import msgspec
from longhaul.core.repository import ONCE, ConcurrencyError
from longhaul.domain import events as ev
from longhaul.gateway.errors import ApiError
from longhaul.gateway.runtime import Runtime
from longhaul.gateway.schedules.records import ScheduleRecord

ACTOR = "scheduler"


class Streak(msgspec.Struct, kw_only=True):
    """A failed tick as the schedule's record counts it."""

    failures: int
    """Failed ticks in a row, this one included."""
    news: bool
    """Worth an event: the first of the row, a new reason, or the pause."""
    pause: bool


def streak(schedule: ScheduleRecord, code: str, pause_after: int) -> Streak:
    """What a failed tick with ``code`` makes of ``schedule``'s row of failures."""
    failures = schedule.failures + 1
    pause = 0 < pause_after <= failures
    news = schedule.failures == 0 or code != schedule.failure_code or pause
    return Streak(failures=failures, news=news, pause=pause)


async def record(
    runtime: Runtime,
    schedule: ScheduleRecord,
    tick_ms: int,
    run_id: str,
    error: ApiError,
    row: Streak,
) -> None:
    """Store the failure of ``tick_ms`` unless it is stored already (NATS errors raise: the
    tick then stays due and is tried again)."""
    async with runtime.nats_call():
        state = await runtime.schedules.load(schedule.schedule_id)
        if state.recorded(tick_ms):
            return
        event = ev.ScheduleFailed(
            owner=schedule.owner,
            name=schedule.name,
            tick_ms=tick_ms,
            run_id=run_id,
            code=error.code,
            error=error.message,
            failures=row.failures,
            paused=row.pause,
        )
        try:
            await runtime.schedules.save(
                schedule.schedule_id, state, lambda _: [event], actor=ACTOR, retry=ONCE
            )
        except ConcurrencyError:
            pass  # another gateway recorded this tick first
