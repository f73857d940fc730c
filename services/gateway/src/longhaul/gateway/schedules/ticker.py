"""The ticker: every gateway looks at every schedule and starts the runs that are due.

Why the gateway: starting a run is its job (the body's checks, image offload, the per-key
active cap, the index mirror), so a scheduled run starts through the one path an API call
takes. Why every gateway, with no lease: exactly-once per tick does not rest on who ticks but
on the run's id, derived from (schedule, tick), and on the log's exclusive create. A gateway
killed between starting a run and moving the schedule's cursor leaves the tick due; whoever
looks next finds the run already started and only moves the cursor. A crash before the start
leaves the tick due too, so it is started later: never zero, never two. A tick that cannot
start its run (refused: the template, the key's cap…) is counted on the schedule and, when it
is news (the first in a row, a new reason, the pause after
``gateway.schedule_pause_after_failures`` in a row), recorded on the log
(``schedules.failures``) before the cursor moves past it, for the notifier.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import time
from typing import Any

import msgspec
from longhaul.gateway.errors import ApiError
from longhaul.gateway.revocation import KEY_REVOKED, Revocation
from longhaul.gateway.runtime import Runtime
from longhaul.gateway.schedules import failures, policy
from longhaul.gateway.schedules.records import ScheduledRun, ScheduleRecord
from longhaul.gateway.schedules.store import ScheduleStore, StaleRecord
from longhaul.gateway.schedules.timing import rfc3339
from longhaul.gateway.usecases import scheduled_runs

log = logging.getLogger(__name__)

POLL_S = 0.5
"""Longest sleep between two looks (a new or changed schedule is seen within it)."""
SAVE_ATTEMPTS = 8
"""Compare-and-set attempts to record a started run on a schedule that keeps changing."""


def now_ms() -> int:
    return round(time.time() * 1000)


def tick_run_id(record: ScheduleRecord, tick_ms: int) -> str:
    return scheduled_runs.derived_run_id(record.template.kind, record.schedule_id, str(tick_ms))


class Ticker:
    def __init__(self, runtime: Runtime, store: ScheduleStore, revocation: Revocation) -> None:
        self.runtime = runtime
        self.store = store
        self.revocation = revocation
        self._first_pass = True

    async def run(self, stop: asyncio.Event) -> None:
        """Until ``stop``: look, start what is due, sleep until the next tick (or POLL_S)."""
        while not stop.is_set():
            wake = POLL_S
            try:
                wake = await self.look()
            except ApiError as exc:  # NATS away: look again shortly
                log.warning("schedule ticker pass failed: %s", exc.message)
            except Exception:  # a bug: log it and look again
                log.exception("schedule ticker pass failed")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), timeout=wake)

    async def look(self) -> float:
        """One pass; returns how long to sleep."""
        earliest = time.time() + POLL_S
        async with self.runtime.nats_call():
            schedules = await self.store.every()
        if self._first_pass:  # what was here at start: its unconfigured owners are revoked
            self.revocation.found(record.owner for record, _ in schedules)
            self._first_pass = False
        for found in schedules:
            try:
                earliest = min(earliest, await self._catch_up(*found))
            except ApiError as exc:  # broker trouble: this schedule waits for the next pass
                log.warning("schedule %s not ticked: %s", found[0].schedule_id, exc.message)
            except Exception:  # a bug or a broken record must not stop the other schedules
                log.exception("schedule %s not ticked", found[0].schedule_id)
        return max(0.01, earliest - time.time())

    async def _catch_up(self, record: ScheduleRecord, revision: int) -> float:
        """Start what is due of one schedule (missed ticks of ``catch_up: all`` one after
        another); returns when it is due next (epoch seconds, ``inf``: not ticking). A
        schedule of an owner this gateway has no key for starts nothing; a revoked key's is
        paused (``revocation``)."""
        if not self.runtime.keys.admits(record.owner):
            if not record.paused and self.revocation.is_revoked(record.owner):
                log.warning("schedule %s paused: its key was revoked", record.schedule_id)
                await self._save(
                    record,
                    revision,
                    cursor=record.next_tick_ms,
                    paused=True,
                    paused_reason=KEY_REVOKED,
                )
            return math.inf
        for _ in range(policy.MAX_CATCH_UP + 1):
            if record.paused or record.next_tick_ms is None:
                break
            if record.next_tick_ms > now_ms():
                return record.next_tick_ms / 1000
            moved = await self.handle(record, revision)
            if moved is None:
                break
            record, revision = moved
        return math.inf

    async def handle(
        self, record: ScheduleRecord, revision: int
    ) -> tuple[ScheduleRecord, int] | None:
        """Act on a schedule whose cursor is due: one run at most per call. Returns the
        schedule as it saved it (``None``: nothing saved, look again next pass)."""
        assert record.next_tick_ms is not None
        timing = record.timing()
        now = now_ms()
        due = timing.due(record.next_tick_ms, now, policy.MAX_CATCH_UP)
        if not due:
            return await self._save(record, revision, cursor=timing.first_after(now))

        def decide(busy: bool) -> policy.Step:
            return policy.step(
                due,
                catch_up=record.catch_up,
                overlap=record.overlap,
                busy=busy,
                now=now,
                after=timing.first_after,
            )

        plan = decide(busy=False)
        # a run a crash (or another gateway) already started is recorded, whatever overlap says
        again = plan.fire is not None and await self._already_started(record, plan.fire)
        if not again and record.overlap != "allow" and await self._busy(record):
            plan = decide(busy=True)
        if plan.wait:
            return None
        error = ""
        run = None
        counted: dict[str, Any] = {}
        if plan.fire is not None:
            run_id = tick_run_id(record, plan.fire)
            try:
                started = await scheduled_runs.start(
                    self.runtime,
                    record.owner,
                    record.template,
                    run_id,
                    schedule_id=record.schedule_id,
                )
            except ApiError as exc:
                if exc.status >= 500 or exc.code == "concurrent_update":
                    return None  # the tick stays due: tried again on the next pass
                error = f"{rfc3339(plan.fire)}: {exc.code}: {exc.message}"
                log.warning("schedule %s could not start its run: %s", record.schedule_id, error)
                counted = await self._failed(record, plan.fire, run_id, exc)
            else:
                run = ScheduledRun(
                    run_id=started.run_id,
                    kind=record.template.kind,
                    tick_ms=plan.fire,
                    started_at=time.time(),
                )
                counted = {"failures": 0, "failure_code": ""}
        return await self._save(
            record,
            revision,
            cursor=plan.cursor,
            run=run,
            skipped=plan.skipped,
            error=error,
            **counted,
        )

    async def _failed(
        self, record: ScheduleRecord, tick_ms: int, run_id: str, exc: ApiError
    ) -> dict[str, Any]:
        """Record the failed tick when it is news; the record's fields that count it (and,
        at the limit, pause the schedule)."""
        limit = self.runtime.config.gateway.schedule_pause_after_failures
        row = failures.streak(record, exc.code, limit)
        if row.news:  # on the log before the cursor moves: told at least once, recorded once
            await failures.record(self.runtime, record, tick_ms, run_id, exc, row)
        counted: dict[str, Any] = {"failures": row.failures, "failure_code": exc.code}
        if row.pause:
            reason = f"{row.failures} ticks in a row started nothing; the last: {exc.message}"
            log.warning("schedule %s paused: %s", record.schedule_id, reason)
            counted |= {"paused": True, "paused_reason": reason}
        return counted

    async def _already_started(self, record: ScheduleRecord, tick_ms: int) -> bool:
        run_id = tick_run_id(record, tick_ms)
        if any(known.run_id == run_id for known in record.runs):
            return True
        try:
            return await scheduled_runs.started_before(
                self.runtime, record.owner, record.template.kind, run_id
            )
        except ApiError:
            return False

    async def _busy(self, record: ScheduleRecord) -> bool:
        """Whether the schedule's latest run is still going (running or waiting)."""
        if not record.runs:
            return False
        last = record.runs[-1]
        repository = self.runtime.traces if last.kind == "trace" else self.runtime.tasks
        async with self.runtime.nats_call():
            state = await repository.load(last.run_id)
        return bool(state.exists and not state.is_final)

    async def _save(
        self,
        record: ScheduleRecord,
        revision: int,
        *,
        cursor: int | None,
        run: ScheduledRun | None = None,
        skipped: int = 0,
        error: str = "",
        **counted: Any,
    ) -> tuple[ScheduleRecord, int] | None:
        changed = msgspec.structs.replace(
            record,
            next_tick_ms=cursor,
            runs=record.with_run(run) if run else record.runs,
            skipped=record.skipped + skipped,
            last_error=error if error or run else record.last_error,
            **counted,
        )
        try:
            async with self.runtime.nats_call():
                return changed, await self.store.update(changed, revision)
        except StaleRecord:
            log.debug("schedule %s changed meanwhile; looked at again", record.schedule_id)
            if run is not None:
                await self._keep_run(record, run, cursor=cursor, skipped=skipped)
            return None

    async def _keep_run(
        self, acted_on: ScheduleRecord, run: ScheduledRun, *, cursor: int | None, skipped: int
    ) -> None:
        """Record a run started while the schedule changed (a pause, a retime, the other
        gateway): the run is on the log whatever changed, and a paused schedule is not looked
        at again, so its runs would otherwise never list it. The cursor moves only if nobody
        moved it meanwhile."""
        for _ in range(SAVE_ATTEMPTS):
            async with self.runtime.nats_call():
                found = await self.store.get(acted_on.owner, acted_on.schedule_id)
            if found is None:
                return  # deleted meanwhile: its runs stay on the log, unlisted with it
            fresh, revision = found
            if any(known.run_id == run.run_id for known in fresh.runs):
                return  # the other gateway recorded it
            if fresh.next_tick_ms == acted_on.next_tick_ms:
                fresh = msgspec.structs.replace(
                    fresh, next_tick_ms=cursor, skipped=fresh.skipped + skipped
                )
            kept = msgspec.structs.replace(fresh, runs=fresh.with_run(run))
            try:
                async with self.runtime.nats_call():
                    await self.store.update(kept, revision)
                return
            except StaleRecord:
                continue
        log.warning(
            "schedule %s kept changing: run %s not listed", acted_on.schedule_id, run.run_id
        )
