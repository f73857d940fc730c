"""A schedule's failed ticks: the first of a row, a new reason and the pause are news (an
event and a notice); the ticks between are only counted; a resume starts the count afresh;
each tick is recorded once on the schedule's log, through its repository."""

from __future__ import annotations

from typing import cast

import msgspec
from longhaul.core.config import LonghaulConfig
from longhaul.core.connection import Connection
from longhaul.core.memory import MemoryStore
from longhaul.core.repository import schedules
from longhaul.core.service import ServiceContext
from longhaul.domain import events as ev
from longhaul.gateway.errors import ApiError
from longhaul.gateway.routers.schedules import _changed
from longhaul.gateway.runtime import Runtime
from longhaul.gateway.schedules.failures import Streak, streak
from longhaul.gateway.schedules.failures import record as record_failure
from longhaul.gateway.schedules.records import ScheduleRecord, Template

from tests.support.runtime import offline_runtime


def schedule(**fields: object) -> ScheduleRecord:
    return ScheduleRecord(
        schedule_id="sched_x",
        owner="k_a",
        name="nightly",
        template=Template(kind="trace", body={}),
        created_at=0.0,
        updated_at=0.0,
        anchor_ms=0,
        every_s=1.0,
        next_tick_ms=1000,
        **fields,  # type: ignore[arg-type]
    )


def test_only_the_first_failure_a_new_reason_and_the_pause_are_news() -> None:
    record, seen = schedule(), []
    for code in ["capped", "capped", "capped", "gone", "gone", "gone"]:
        row = streak(record, code, pause_after=6)
        seen.append(row)
        record = msgspec.structs.replace(record, failures=row.failures, failure_code=code)
    assert seen == [
        Streak(failures=1, news=True, pause=False),
        Streak(failures=2, news=False, pause=False),
        Streak(failures=3, news=False, pause=False),
        Streak(failures=4, news=True, pause=False),  # another reason
        Streak(failures=5, news=False, pause=False),
        Streak(failures=6, news=True, pause=True),
    ]
    assert streak(schedule(failures=99, failure_code="capped"), "capped", 0).pause is False


def test_a_resume_clears_the_count_and_the_reason_a_pause_keeps_them() -> None:
    paused = schedule(paused=True, failures=10, failure_code="capped", paused_reason="why")
    resumed = _changed(paused, {"paused": False})
    assert (resumed.failures, resumed.failure_code, resumed.paused_reason) == (0, "", "")
    renamed = _changed(paused, {"name": "other"})
    assert (renamed.paused, renamed.failures, renamed.paused_reason) == (True, 10, "why")


def offline(store: MemoryStore) -> Runtime:
    config = LonghaulConfig()
    rt = offline_runtime(config)
    # failures.record only uses the schedules' repository; NATS would fail on the None
    rt.ctx = ServiceContext(name="gateway", config=config, conn=cast(Connection, None))
    rt.ctx.schedules = schedules(store)
    return rt


async def failed(rt: Runtime, tick_ms: int, code: str = "capped") -> None:
    record = schedule()
    row = streak(record, code, pause_after=0)
    await record_failure(rt, record, tick_ms, f"run_{tick_ms}", ApiError(429, code, "no"), row)


async def logged(store: MemoryStore) -> list[tuple[int, int]]:
    return [
        (r.event.tick_ms, r.event.n)
        async for r in store.replay("schedule", "sched_x")
        if isinstance(r.event, ev.ScheduleFailed)
    ]


async def test_a_failed_tick_is_recorded_once_on_the_schedules_log() -> None:
    store = MemoryStore()
    rt = offline(store)
    await failed(rt, 1000)
    await failed(rt, 1000)  # a gateway that crashed before moving its cursor
    await failed(rt, 500)  # an older tick: already behind the log
    await failed(rt, 2000, "gone")
    assert await logged(store) == [(1000, 1), (2000, 2)]
    state = await rt.schedules.load("sched_x")
    assert state.recorded(2000) and not state.recorded(3000) and state.version == 2


async def test_of_two_gateways_at_one_tick_one_records_it() -> None:
    store = MemoryStore()
    rt = offline(store)
    twin = ev.ScheduleFailed(tick_ms=1000, run_id="run_1000", code="capped", error="no")
    store.interleave("schedule", "sched_x", twin)  # the other gateway appends first
    await failed(rt, 1000)
    assert await logged(store) == [(1000, 1)]
