"""The schedule's fold: its log holds the ticks that started nothing, and the fold knows the
last of them (which is all the ticker decides from)."""

from __future__ import annotations

import pytest
from longhaul.domain import events as ev
from longhaul.domain.state import InvalidTransition, ScheduleState
from longhaul.domain.state.fold import apply_or_skip


def failed(tick_ms: int, n: int) -> ev.ScheduleFailed:
    return ev.ScheduleFailed(
        aggregate_id="sched_x", n=n, tick_ms=tick_ms, run_id=f"r{tick_ms}", code="c", error="e"
    )


def test_the_fold_keeps_the_last_failed_tick_and_its_position() -> None:
    state = ScheduleState()
    assert not state.exists and not state.recorded(1)
    state.apply(failed(1000, 1), stream_seq=7)
    state.apply(failed(2000, 2), stream_seq=9)
    assert state.exists and not state.is_final
    assert (state.schedule_id, state.version, state.stream_seq) == ("sched_x", 2, 9)
    assert state.recorded(1000) and state.recorded(2000) and not state.recorded(2001)


def test_another_aggregates_event_is_refused_and_skipped_by_readers() -> None:
    state = ScheduleState()
    state.apply(failed(1000, 1), stream_seq=3)
    with pytest.raises(InvalidTransition):
        state.check(ev.HumanReplied(content="?"))
    with pytest.raises(InvalidTransition):
        state.check(
            ev.ScheduleFailed(aggregate_id="sched_y", tick_ms=5, run_id="r", code="c", error="e")
        )
    fault = apply_or_skip(state, ev.HumanReplied(content="?", n=2), 4)
    assert fault is not None and state.version == 2 and state.recorded(1000)
