"""A snapshot written by an older build loads under this one: ``TraceState`` of shape 4 (every
field flat) is upgraded to its parts, never replayed for nothing nor decoded into the wrong
fields (``longhaul.domain.state.fold.decode_snapshot``)."""

from __future__ import annotations

import msgspec
from longhaul.domain import events as ev
from longhaul.domain.state import TaskState, TraceState
from longhaul.domain.state.fold import decode_snapshot

from tests.support.folds import shape_4_story


def story() -> tuple[list[ev.Event], bytes, int]:
    events, snapshot = shape_4_story()
    return events, snapshot, 4


def replayed(events: list[ev.Event]) -> TraceState:
    state = TraceState()
    for seq, event in enumerate(events, start=1):
        state.apply(event, seq)
    return state


def test_a_shape_4_snapshot_is_upgraded_to_the_state_a_replay_folds() -> None:
    events, snapshot, schema = story()
    assert schema == 4 < TraceState.SCHEMA
    upgraded = decode_snapshot(TraceState, snapshot, schema)
    assert upgraded is not None
    assert msgspec.to_builtins(upgraded) == msgspec.to_builtins(replayed(events))
    # every part the story fills came across
    assert upgraded.status == "waiting" and upgraded.wait_reason == "human"
    assert upgraded.last_sequence == 7 and upgraded.image_messages == 1
    assert upgraded.totals.prompt_tokens == 600 and upgraded.run_usage.tokens == 710
    assert [u.name for u in upgraded.uploads_pending] == ["b.txt"]
    assert upgraded.subtraces["t_child"].status == "completed"
    assert upgraded.ledger.effects["c_pay"].cut_off
    assert upgraded.verification.failures and not upgraded.verification.unconsumed_failure


def test_an_upgraded_trace_goes_on_to_its_end() -> None:
    events, snapshot, schema = story()
    upgraded = decode_snapshot(TraceState, snapshot, schema)
    assert upgraded is not None
    fresh = replayed(events)
    rest: list[ev.Event] = [
        ev.HumanReplied(aggregate_id="t_story", content="the main one"),
        ev.MessageAppended(
            aggregate_id="t_story",
            sequence=8,
            parent_sequence=7,
            role="tool",
            tool_call_id="c_ask",
            content="the main one",
        ),
        ev.Completed(aggregate_id="t_story", summary="paid"),
    ]
    for state in (upgraded, fresh):
        for offset, event in enumerate(rest, start=len(events) + 1):
            state.apply(event, offset)
    assert upgraded.status == "completed" and upgraded.human_reply is None
    assert msgspec.to_builtins(upgraded) == msgspec.to_builtins(fresh)


def test_a_payload_not_of_the_shape_it_claims_is_not_read() -> None:
    events, _, _ = story()
    current = msgspec.msgpack.encode(replayed(events))
    assert decode_snapshot(TraceState, current, TraceState.SCHEMA) is not None
    assert decode_snapshot(TraceState, current, 4) is None


def test_a_shape_no_upgrade_starts_from_is_not_read() -> None:
    _, snapshot, _ = story()
    assert decode_snapshot(TraceState, snapshot, 3) is None
    assert decode_snapshot(TraceState, snapshot, TraceState.SCHEMA + 1) is None
    task = msgspec.msgpack.encode(TaskState(task_id="k_1"))
    assert decode_snapshot(TaskState, task, TaskState.SCHEMA - 1) is None
    loaded = decode_snapshot(TaskState, task, TaskState.SCHEMA)
    assert loaded is not None and loaded.task_id == "k_1"
