"""Waits that hold no worker, stops, rewinds: an in-process executor, a real engine and server."""

from __future__ import annotations

import asyncio
from pathlib import Path

import msgspec
from longhaul.core.config import LonghaulConfig, NatsConfig, StoreConfig
from longhaul.core.snapshots import SnapshotStore
from longhaul.core.store import EventStore
from longhaul.domain import events as ev
from longhaul.domain.state import TraceState
from longhaul.executor.leases import Leases

from tests.integration.executor import tooling
from tests.integration.executor.scripts import record_steps, write_script
from tests.support.folds import trace_state
from tests.support.stack import (
    FAST_LEASE_TTL_S,
    InProcessExecutor,
    append_to,
    create_trace,
    wait_for_trace,
    wait_lease_released,
    waiting,
)

TOOLS = {"tool_modules": ["tests.integration.executor.tooling"]}


async def test_a_human_wait_survives_an_executor_restart(
    nats_url: str, namespace: str, store: EventStore, tmp_path: Path
) -> None:
    model = write_script(
        tmp_path / "ask.yaml",
        [
            {"tool_calls": [{"name": "ask_human", "arguments": {"question": "blue or green?"}}]},
            {"content": "going with the answer"},
        ],
    )
    async with InProcessExecutor(nats_url, namespace, "exec-first") as first:
        trace_id = await create_trace(store, "pick a colour", model=model)
        asked = await wait_for_trace(store, trace_id, waiting)
        await wait_lease_released(store.conn, trace_id)  # the wait holds no lease…
        assert first.executor.metrics.active_turns._value.get() == 0  # …and no turn
    assert asked.wait_reason == "human"
    async with InProcessExecutor(nats_url, namespace, "exec-second"):
        await append_to(store, trace_id, ev.HumanReplied(content="green"))
        state = await wait_for_trace(store, trace_id)
    assert state.status == "completed", state.error
    [reply] = [m for m in state.main_path() if m.role == "tool"]
    assert reply.content == "green" and reply.tool_call_id == asked.wait_tool_call_id


async def test_a_stop_request_mid_turn_ends_the_trace_at_the_next_check_point(
    nats_url: str, namespace: str, store: EventStore, tmp_path: Path
) -> None:
    gate = f"stop-{tmp_path.name}"
    log = tmp_path / "calls.jsonl"
    model = write_script(
        tmp_path / "gate.yaml",
        [
            {"tool_calls": [{"name": "gate", "arguments": {"name": gate}}]},
            {"tool_calls": [{"name": "record", "arguments": {"step": 1, "log": str(log)}}]},
            {"content": "never reached"},
        ],
    )
    entered = tooling.ENTERED.setdefault(gate, asyncio.Event())
    async with InProcessExecutor(nats_url, namespace, settings=TOOLS):
        trace_id = await create_trace(store, "work until stopped", model=model)
        await asyncio.wait_for(entered.wait(), 15)
        await append_to(store, trace_id, ev.StopRequested(reason="user"))
        tooling.GATES.setdefault(gate, asyncio.Event()).set()
        state = await wait_for_trace(store, trace_id)
    assert state.status == "stopped"
    roles = [m.role for m in state.main_path()]
    assert roles == ["user", "assistant", "tool"]  # the gate's result kept, no further step
    assert state.main_path()[-1].content == f"gate {gate} passed"
    assert not log.exists()


async def test_a_stop_request_for_a_waiting_trace_is_recorded_directly(
    nats_url: str, namespace: str, store: EventStore, tmp_path: Path
) -> None:
    model = write_script(
        tmp_path / "ask.yaml",
        [
            {"tool_calls": [{"name": "ask_human", "arguments": {"question": "?"}}]},
        ],
    )
    async with InProcessExecutor(nats_url, namespace) as ex:
        trace_id = await create_trace(store, "wait for me", model=model)
        asked = await wait_for_trace(store, trace_id, waiting)
        await append_to(store, trace_id, ev.StopRequested(reason="user"))
        state = await wait_for_trace(store, trace_id)
        turns = ex.executor.metrics.turns.labels(end="waiting")._value.get()
    assert state.status == "stopped" and state.stop_reason == "stop_requested"
    assert state.last_sequence == asked.last_sequence  # no model step after the request
    assert turns == 1  # the stop itself ran no turn


async def test_rewind_through_the_log_matches_the_pure_fold(
    nats_url: str, namespace: str, store: EventStore, tmp_path: Path
) -> None:
    log = tmp_path / "calls.jsonl"
    model = record_steps(tmp_path / "steps.yaml", 3, log)
    async with InProcessExecutor(nats_url, namespace, settings=TOOLS):
        trace_id = await create_trace(store, "three steps", model=model)
        first = await wait_for_trace(store, trace_id)
        cut = first.main_path()[2].sequence  # after the first tool result
        kept = first.path_to(cut)
        await append_to(
            store,
            trace_id,
            ev.RunRequested(
                after_sequence=cut, messages=[ev.InputMessage(role="user", content="again")]
            ),
        )
        rewound = await wait_for_trace(store, trace_id, lambda s: s.runs == 2 and s.is_final)
    assert rewound.status == "completed", rewound.error
    pure = TraceState()
    async for recorded in store.replay("trace", trace_id):
        pure.apply(recorded.event, recorded.seq)
    loaded = await trace_state(store, trace_id)  # snapshot + tail, as an executor resumes
    assert rewound.path == pure.path == loaded.path
    assert msgspec.json.encode(loaded.main_path()) == msgspec.json.encode(pure.main_path())
    assert pure.path[: len(kept)] == kept
    assert pure.messages[pure.path[len(kept)]].content == "again"
    assert [m.role for m in pure.main_path()[len(kept) :]] == (
        ["user"] + ["assistant", "tool"] * 2 + ["assistant"]
    )
    assert first.last_sequence < pure.path[len(kept)]  # the old branch stays in the tree


async def test_regenerate_replaces_the_final_answer_on_the_main_path(
    nats_url: str, namespace: str, store: EventStore, tmp_path: Path
) -> None:
    model = record_steps(tmp_path / "steps.yaml", 1, tmp_path / "calls.jsonl")
    async with InProcessExecutor(nats_url, namespace, settings=TOOLS):
        trace_id = await create_trace(store, "one step", model=model)
        first = await wait_for_trace(store, trace_id)
        old_answer = first.main_path()[-1]
        await append_to(store, trace_id, ev.RunRequested(after_sequence=old_answer.sequence - 1))
        again = await wait_for_trace(store, trace_id, lambda s: s.runs == 2 and s.is_final)
    assert again.status == "completed"
    new_answer = again.main_path()[-1]
    assert new_answer.role == "assistant" and new_answer.sequence > old_answer.sequence
    assert new_answer.parent_sequence == old_answer.parent_sequence
    assert old_answer.sequence not in again.path and old_answer.sequence in again.messages


async def test_a_reply_that_arrives_while_a_dead_executor_holds_the_lease_is_not_lost(
    nats_url: str, namespace: str, store: EventStore, tmp_path: Path
) -> None:
    model = write_script(
        tmp_path / "ask.yaml",
        [
            {"tool_calls": [{"name": "ask_human", "arguments": {"question": "blue or green?"}}]},
            {"content": "going with the answer"},
        ],
    )
    async with InProcessExecutor(nats_url, namespace, "exec-first"):
        trace_id = await create_trace(store, "pick a colour", model=model)
        await wait_for_trace(store, trace_id, waiting)
        await wait_lease_released(store.conn, trace_id)
    # An executor killed before it released its lease: the lease lives on until its TTL.
    crashed = Leases(store.conn, "exec-crashed", FAST_LEASE_TTL_S)
    assert await crashed.acquire(Leases.trace_key(trace_id)) is not None
    async with InProcessExecutor(nats_url, namespace, "exec-second"):
        # The wake-up finds the lease busy; it must come back, not be acknowledged away
        # (the index still says "waiting", so the sweeper would never look at this trace).
        await append_to(store, trace_id, ev.HumanReplied(content="green"))
        state = await wait_for_trace(store, trace_id, within=30)
    assert state.status == "completed", state.error
    assert [m.content for m in state.main_path() if m.role == "tool"] == ["green"]


async def test_the_end_of_a_long_turn_is_snapshotted(
    nats_url: str, namespace: str, store: EventStore, tmp_path: Path
) -> None:
    """On a long log the snapshot schedule leaves up to ~1/4 of it behind; a turn that ends
    with ``snapshot_every`` events or more since its last snapshot takes one, so a resume
    replays none of them (issue 46)."""
    config = LonghaulConfig(
        nats=NatsConfig(url=nats_url, namespace=namespace),
        store=StoreConfig(lease_ttl_s=FAST_LEASE_TTL_S, snapshot_every=2),
    )
    model = record_steps(tmp_path / "steps.yaml", 20, tmp_path / "calls.jsonl")
    async with InProcessExecutor(nats_url, namespace, config=config, settings=TOOLS):
        trace_id = await create_trace(store, "twenty steps", model=model)
        final = await wait_for_trace(store, trace_id)
        await wait_lease_released(store.conn, trace_id)  # the turn, snapshots included, ended
    assert final.status == "completed", final.error
    snapshot = await SnapshotStore(store.conn).read("trace", trace_id, TraceState)
    assert snapshot is not None
    assert (snapshot.version, snapshot.stream_seq) == (final.version, final.stream_seq)
