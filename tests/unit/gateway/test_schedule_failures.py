"""A schedule's failed ticks: the first of a row, a new reason and the pause are news (an
event and a notice); the ticks between are only counted; a resume starts the count afresh."""

from __future__ import annotations

import msgspec
from longhaul.gateway.routers.schedules import _changed
from longhaul.gateway.schedules.failures import Streak, streak
from longhaul.gateway.schedules.records import ScheduleRecord, Template


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
