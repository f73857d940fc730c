"""Pure decisions of the executor shell: what a wake-up leads to, and which events the sink
lets through to the log."""

from __future__ import annotations

import itertools

import pytest
from longhaul.core.snapshots import snapshot_interval
from longhaul.domain import events as ev
from longhaul.domain.state import InvalidTransition, TraceState
from longhaul.executor.decide import Action, decide
from longhaul.executor.sink import executor_rule


def folded(*events: ev.TraceEvent) -> TraceState:
    state = TraceState()
    for n, event in enumerate(events, start=1):
        if not event.aggregate_id:
            event.aggregate_id = "t_1"
        event.n = n
        state.apply(event)
    return state


CREATED = ev.TraceCreated(messages=[ev.InputMessage(role="user", content="hi")])


def test_unknown_and_final_traces_need_nothing() -> None:
    assert decide(TraceState()) is Action.NOTHING
    assert decide(folded(CREATED, ev.Completed(summary="ok"))) is Action.NOTHING


def test_running_trace_needs_a_turn() -> None:
    assert decide(folded(CREATED)) is Action.RUN


def test_waiting_trace_needs_nothing_until_answered() -> None:
    waiting = folded(CREATED, ev.Waiting(reason="human", tool_call_id="c1"))
    assert decide(waiting) is Action.NOTHING
    replied = folded(
        CREATED, ev.Waiting(reason="human", tool_call_id="c1"), ev.HumanReplied(content="yes")
    )
    assert decide(replied) is Action.RUN


def test_stop_request_wins_over_running_and_waiting() -> None:
    assert decide(folded(CREATED, ev.StopRequested())) is Action.STOP
    waiting = folded(CREATED, ev.Waiting(reason="subtraces"), ev.StopRequested())
    assert decide(waiting) is Action.STOP


def precheck(state: TraceState, event: ev.TraceEvent) -> None:
    """What the sink checks before an event is appended: its own rule, then the fold's."""
    executor_rule(state, event)
    state.check(event)


def test_precheck_accepts_the_next_message_and_refuses_gaps_and_unknown_parents() -> None:
    state = folded(CREATED)
    precheck(state, ev.MessageAppended(sequence=2, parent_sequence=1, role="assistant"))
    with pytest.raises(InvalidTransition):
        precheck(state, ev.MessageAppended(sequence=3, parent_sequence=1, role="assistant"))
    with pytest.raises(InvalidTransition):
        precheck(state, ev.MessageAppended(sequence=2, parent_sequence=9, role="assistant"))


def test_precheck_refuses_messages_on_a_trace_that_is_not_running() -> None:
    state = folded(CREATED, ev.Waiting(reason="human"))
    with pytest.raises(InvalidTransition):
        precheck(state, ev.MessageAppended(sequence=2, parent_sequence=1, role="assistant"))


def test_precheck_probes_other_events_without_changing_the_state() -> None:
    state = folded(CREATED)
    precheck(state, ev.Completed(summary="done"))
    assert state.status == "running"
    with pytest.raises(InvalidTransition):
        precheck(state, ev.HumanReplied(content="not waiting"))


def test_snapshots_come_every_n_events_then_every_eighth_of_the_log() -> None:
    taken = [
        v
        for v in range(1, 21_001)
        if v // snapshot_interval(200, v) != (v - 1) // snapshot_interval(200, v)
    ]
    assert taken[:5] == [200, 400, 600, 800, 1000]
    gaps = [b - a for a, b in itertools.pairwise(taken)]
    assert all(gap <= max(200, b // 4) for gap, b in zip(gaps, taken[1:], strict=True))
    assert len(taken) < 30  # linear total snapshot work, not one per 200 events


def test_waiting_for_children_is_refused_once_none_is_running() -> None:
    spawned = ev.SubtraceSpawned(child_trace_id="t_child", tool_call_id="c1")
    state = folded(CREATED, spawned)
    precheck(state, ev.Waiting(reason="subtraces"))
    state.apply(ev.SubtraceFinished(child_trace_id="t_child", status="completed", n=3))
    with pytest.raises(InvalidTransition):
        precheck(state, ev.Waiting(reason="subtraces"))
