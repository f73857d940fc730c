"""Turns end to end: a real engine, a scripted model, an in-process executor, a real server."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path

import httpx
import msgspec
import pytest
from longhaul.agent.contract import LiveUpdate
from longhaul.core.index import TraceIndex
from longhaul.core.nats_server import free_port
from longhaul.core.store import EventStore
from longhaul.domain import events as ev
from longhaul.domain.ids import new_id
from longhaul.domain.state import TraceState
from longhaul.executor import live

from tests.integration.executor import tooling
from tests.integration.executor.scripts import record_steps, write_script
from tests.support.folds import trace_state
from tests.support.stack import (
    InProcessExecutor,
    append_to,
    create_trace,
    eventually,
    wait_for_trace,
)

TOOLS = {"tool_modules": ["tests.integration.executor.tooling"]}


def log_lines(path: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


async def test_a_scripted_trace_runs_to_completion(
    nats_url: str, namespace: str, store: EventStore, tmp_path: Path
) -> None:
    log = tmp_path / "calls.jsonl"
    model = record_steps(tmp_path / "script.yaml", 3, log)
    async with InProcessExecutor(nats_url, namespace, settings=TOOLS) as ex:
        trace_id = await create_trace(store, "do three steps", model=model)
        state = await wait_for_trace(store, trace_id)
        steps = ex.executor.metrics.steps

        async def four_steps() -> bool:  # counted once the executor has its last append's ack
            return bool(steps._value.get() == 4)

        await eventually(four_steps, within=10)
    assert state.status == "completed", state.error
    roles = [m.role for m in state.main_path()]
    assert roles == ["user"] + ["assistant", "tool"] * 3 + ["assistant"]
    starts = [line for line in log_lines(log) if line["phase"] == "start"]
    calls = [m for m in state.main_path() if m.role == "tool"]
    assert [s["key"] for s in starts] == [f"{trace_id}:{m.tool_call_id}" for m in calls]
    entry = await TraceIndex(store.conn).get(trace_id)
    assert entry is not None and entry.status == "completed"
    assert entry.last_event_seq == state.stream_seq


async def test_live_updates_carry_the_streamed_answer_and_tool_progress(
    nats_url: str,
    namespace: str,
    store: EventStore,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A call is announced once it has run TOOL_START_DELAY_S; the fast call's span holds its
    # middleware's NATS round trips, which a loaded box can stretch past 0.2 s: a delay of 1 s
    # keeps it unannounced however slow the machine, and the slow call outlasts it.
    monkeypatch.setattr(live, "TOOL_START_DELAY_S", 1.0)
    answer = "a final answer long enough to arrive in several streamed chunks"
    model = write_script(
        tmp_path / "live.yaml",
        [
            {
                "tool_calls": [
                    # long enough to be announced (a fast call's result is in the log)
                    {
                        "name": "record",
                        "arguments": {"step": 0, "log": str(tmp_path / "l"), "hold_ms": 1200},
                    },
                    {"name": "record", "arguments": {"step": 1, "log": str(tmp_path / "l")}},
                ]
            },
            {"content": answer},
        ],
    )
    trace_id = new_id("t")
    sub = await store.conn.nc.subscribe(store.conn.names.live(trace_id))
    async with InProcessExecutor(nats_url, namespace, settings=TOOLS):
        await create_trace(store, "stream it", trace_id=trace_id, model=model)
        state = await wait_for_trace(store, trace_id)
    assert state.status == "completed"
    updates: list[LiveUpdate] = []
    try:
        async with asyncio.timeout(10):
            while not updates or updates[-1].kind != "status":
                msg = await sub.next_msg(timeout=10)
                updates.append(msgspec.json.decode(msg.data, type=LiveUpdate))
    finally:
        await sub.unsubscribe()
    assert "".join(u.text for u in updates if u.kind == "delta") == answer
    assert updates[-1].text == "completed"
    tools = [(u.kind, u.tool_call_id) for u in updates if u.kind in ("tool_start", "tool_end")]
    calls = state.main_path()[1].tool_calls or []
    slow, fast = (call.id for call in calls)
    assert fast != slow and tools == [("tool_start", slow), ("tool_end", slow)]  # fast: unannounced
    kinds = [u.kind for u in updates]
    assert kinds.index("tool_end") < kinds.index("delta")


async def test_metrics_are_served_on_the_metrics_port(
    nats_url: str, namespace: str, store: EventStore, tmp_path: Path
) -> None:
    port = free_port()
    model = record_steps(tmp_path / "script.yaml", 2, tmp_path / "calls.jsonl")
    async with InProcessExecutor(nats_url, namespace, settings={**TOOLS, "metrics_port": port}):
        trace_id = await create_trace(store, "two steps", model=model)
        await wait_for_trace(store, trace_id)
        async with httpx.AsyncClient(timeout=10) as client:

            async def turn_counted() -> str | None:
                """The scrape once the turn has ended (it is counted after its last append)."""
                body = (await client.get(f"http://127.0.0.1:{port}/metrics")).text
                counted = 'longhaul_executor_turns_total{end="completed"} 1.0' in body
                return body if counted else None

            body = await eventually(turn_counted, within=10)
    assert "longhaul_executor_steps_total 3.0" in body
    assert "longhaul_executor_events_appended_total" in body


async def test_verification_waits_for_the_verifier_and_reinjects_a_failure(
    nats_url: str, namespace: str, store: EventStore, tmp_path: Path
) -> None:
    model = write_script(
        tmp_path / "verify.yaml",
        [
            {"content": "answer one"},
            {"content": "answer two"},
        ],
    )

    def verifying(attempt: int) -> Callable[[TraceState], bool]:
        return lambda s: s.verification.pending and s.verification.attempts == attempt

    async with InProcessExecutor(nats_url, namespace):
        trace_id = await create_trace(
            store, "answer carefully", model=model, verification={"kind": "schema"}
        )
        first = await wait_for_trace(store, trace_id, verifying(1))
        assert first.status == "waiting" and first.wait_reason == "verification"
        await append_to(store, trace_id, ev.VerificationFailed(attempt=1, errors=["too vague"]))
        await wait_for_trace(store, trace_id, verifying(2))
        await append_to(store, trace_id, ev.VerificationPassed(attempt=2))
        state = await wait_for_trace(store, trace_id)
    assert state.status == "completed" and state.summary == "answer two"
    feedback = [m for m in state.main_path() if m.role == "user" and m.synthetic]
    assert len(feedback) == 1 and "too vague" in str(feedback[0].content)


async def test_a_turn_that_loses_its_lease_is_cancelled_at_once(
    nats_url: str, namespace: str, store: EventStore, tmp_path: Path
) -> None:
    gate = f"lease-{tmp_path.name}"
    model = write_script(
        tmp_path / "gate.yaml",
        [
            {"tool_calls": [{"name": "gate", "arguments": {"name": gate}}]},
            {"content": "finished by whoever holds the lease"},
        ],
    )
    entered = tooling.ENTERED.setdefault(gate, asyncio.Event())
    async with InProcessExecutor(nats_url, namespace, settings=TOOLS) as ex:
        trace_id = await create_trace(store, "hold the line", model=model)
        await asyncio.wait_for(entered.wait(), 15)
        kv = await store.conn.kv(store.conn.names.leases)
        await kv.put(f"trace.{trace_id}", b'{"owner": "intruder", "acquired_at": 0}')
        lost = ex.executor.metrics.leases_lost

        async def noticed() -> bool:  # the keeper's next renewal (TTL/3) finds the intruder
            return bool(lost._value.get() >= 1)

        await eventually(noticed, within=10)
        stalled = await trace_state(store, trace_id)
        assert stalled.unanswered_tool_calls()  # the gate call was cancelled, not answered
        await kv.purge(f"trace.{trace_id}")  # the intruder goes away without a TTL
        tooling.GATES.setdefault(gate, asyncio.Event()).set()
        # The sweeper brings it back. ``gate`` is unsafe and was cut off while it acted: the
        # effect ledger does not run it again blindly, a person is asked.
        asked = await wait_for_trace(store, trace_id, lambda s: s.wait_reason == "approval")
        [call] = stalled.unanswered_tool_calls()
        assert asked.approval_pending == [call.id] and "outcome unknown" in asked.wait_detail
        await append_to(store, trace_id, ev.ToolDecided(tool_call_id=call.id, approved=True))
        state = await wait_for_trace(store, trace_id)
    assert state.status == "completed"
    [answer] = [m for m in state.main_path() if m.role == "tool"]
    assert answer.content == f"gate {gate} passed" and not answer.synthetic  # run again


async def test_each_tool_call_acts_only_once_the_previous_result_is_in_the_log(
    nats_url: str, namespace: str, store: EventStore, tmp_path: Path
) -> None:
    """Results are appended write-behind (in flight while the next model request is built);
    the next call must still find the previous result durable, in order."""

    async def tool_results_in_log(trace_id: str) -> str:
        fresh = EventStore(store.conn)  # no cached fold: what the server holds now
        logged = await trace_state(fresh, trace_id)
        return str(sum(1 for m in logged.main_path() if m.role == "tool"))

    tooling.LOG_PROBES["results"] = tool_results_in_log
    probes = [{"name": "probe", "arguments": {"name": "results", "step": n}} for n in range(3)]
    model = write_script(
        tmp_path / "probe.yaml",
        [{"tool_calls": probes[:2]}, {"tool_calls": probes[2:]}, {"content": "done"}],
    )
    async with InProcessExecutor(nats_url, namespace, settings=TOOLS):
        trace_id = await create_trace(store, "probe the log", model=model)
        state = await wait_for_trace(store, trace_id)
    assert state.status == "completed", state.error
    seen = [m.content for m in state.main_path() if m.role == "tool"]
    assert seen == ["0", "1", "2"]
