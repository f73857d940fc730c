"""A snapshot written by an older build loads under this one: ``TraceState`` of shape 4 (every
field flat) is upgraded to its parts, never replayed for nothing nor decoded into the wrong
fields (``longhaul.domain.state.fold.decode_snapshot``)."""

from __future__ import annotations

import gc

import msgspec
import pytest
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


def big_state(messages: int) -> TraceState:
    state = TraceState()
    events: list[ev.Event] = [
        ev.TraceCreated(messages=[ev.InputMessage(role="user", content="go")])
    ]
    for sequence in range(2, messages + 2):
        call = ev.ToolCall.of(id=f"c{sequence}", name="noop", arguments="{}")
        events.append(
            ev.MessageAppended(
                sequence=sequence,
                parent_sequence=sequence - 1,
                role="assistant",
                content=[{"type": "text", "text": "x"}],
                tool_calls=[call],
            )
        )
    for seq, event in enumerate(events, start=1):
        state.apply(event, seq)
    return state


def test_a_big_snapshot_decodes_without_the_collector_rescanning_it() -> None:
    """Each collection during a decode scans the objects the decode just built (issue 46: two
    thirds of a 20,000-message decode's CPU, a collection every 700 new objects); the collector
    is paused while it decodes and on again after, also when the payload does not decode."""
    state = big_state(3_000)
    data = msgspec.msgpack.encode(state)
    collections: list[int] = []

    def on_gc(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            collections.append(info["generation"])

    gc.collect()
    gc.callbacks.append(on_gc)
    try:
        decoded = decode_snapshot(TraceState, data, TraceState.SCHEMA)
        # one collection when the collector is back on (it scans the new objects once)
        assert len(collections) <= 1
        assert gc.isenabled()
        with pytest.raises(msgspec.DecodeError):
            decode_snapshot(TraceState, data[: len(data) // 2], TraceState.SCHEMA)
        assert gc.isenabled()
    finally:
        gc.callbacks.remove(on_gc)
    assert decoded is not None
    assert msgspec.to_builtins(decoded) == msgspec.to_builtins(state)
    assert len(decoded.messages) == 3_001
    # the messages, their calls and usage are not tracked: a full collection skips them
    message = decoded.messages[2]
    assert message.tool_calls is not None
    assert not any(
        map(gc.is_tracked, (message, message.tool_calls[0], message.tool_calls[0].function))
    )
    assert not gc.is_tracked(ev.Usage(prompt_tokens=1))
