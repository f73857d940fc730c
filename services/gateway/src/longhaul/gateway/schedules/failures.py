"""A tick that started nothing, recorded on the log: ``schedule_failed`` on the schedule's
own aggregate (``lh.ev.schedule.<id>.schedule_failed``), which the notifier's consumer turns
into ``schedule.failed`` notices.

Once per (schedule, tick), whoever ticks: the ticker handles a schedule's ticks in order and
moves its cursor only after the event is stored, so the tick being recorded is at or after
the last one on the log. The last event is read (one direct read of the subject's last
message) and, when it is not already this tick's, the new one is appended expecting that
last sequence: a gateway that crashed before moving the cursor finds its event there, and of
two gateways at the same tick one appends and the other is refused by the expected sequence.
"""

from __future__ import annotations

from longhaul.core.store import ConcurrencyError, Position
from longhaul.domain import events as ev
from longhaul.gateway.errors import ApiError
from longhaul.gateway.runtime import Runtime
from longhaul.gateway.schedules.records import ScheduleRecord
from nats.js.errors import NotFoundError

ACTOR = "scheduler"
EVENT_TYPE = "schedule_failed"


async def _last(runtime: Runtime, schedule_id: str) -> tuple[ev.Event | None, Position]:
    conn = runtime.service.conn
    subject = conn.names.subject("schedule", schedule_id, EVENT_TYPE)
    try:
        stored = await conn.js.get_last_msg(conn.names.stream, subject)
    except NotFoundError:
        return None, Position()
    try:
        event = ev.decode(stored.data or b"")
    except ev.EventDecodeError:  # an unreadable last event: still where the log ends
        return None, Position(int(stored.seq or 0), 0)
    return event, Position(int(stored.seq or 0), event.n)


async def record(
    runtime: Runtime, schedule: ScheduleRecord, tick_ms: int, run_id: str, error: ApiError
) -> None:
    """Store the failure of ``tick_ms`` unless it is stored already (NATS errors raise: the
    tick then stays due and is tried again)."""
    async with runtime.nats_call():
        last, position = await _last(runtime, schedule.schedule_id)
        if isinstance(last, ev.ScheduleFailed) and last.tick_ms >= tick_ms:
            return
        event = ev.ScheduleFailed(
            owner=schedule.owner,
            name=schedule.name,
            tick_ms=tick_ms,
            run_id=run_id,
            code=error.code,
            error=error.message,
        )
        try:
            await runtime.store.append(
                "schedule", schedule.schedule_id, [event], expected=position, actor=ACTOR
            )
        except ConcurrencyError:
            pass  # another gateway recorded this tick first
