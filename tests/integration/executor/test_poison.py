"""Bad events and bad code never stop an executor. An undecodable payload or an event the fold
refuses, written into a trace's log around every checked writer (as a buggy or hostile writer
could), is skipped by every read and recorded as a fault: the trace goes on. A wake-up whose
handling keeps failing (a bug) is poison: after N attempts the trace fails visibly."""

from __future__ import annotations

from pathlib import Path

from longhaul.core.store import EventStore, Position
from longhaul.domain import events as ev
from longhaul.domain.config import MiddlewareEntry, PipelineConfig
from longhaul.domain.ids import new_id
from longhaul.executor.poison import POISON_STOP_REASON

from tests.integration.executor.scripts import record_steps, write_script
from tests.support.folds import trace_state
from tests.support.stack import (
    InProcessExecutor,
    append_to,
    create_trace,
    test_config,
    wait_for_trace,
    waiting,
)

SETTINGS = {"tool_modules": ["tests.integration.executor.tooling"], "poison_attempts": 2}
CRASH = MiddlewareEntry(name="Crash", use="tests.integration.executor.tooling:CrashOnMarker")


async def test_broken_events_are_skipped_as_faults_and_the_trace_goes_on(
    nats_url: str, namespace: str, store: EventStore, tmp_path: Path
) -> None:
    garbage_only = new_id("t")
    await store.conn.js.publish(
        store.conn.names.subject("trace", garbage_only, "trace_created"), b"{not json"
    )
    ask = write_script(
        tmp_path / "ask.yaml",
        [
            {"tool_calls": [{"name": "ask_human", "arguments": {"question": "?"}}]},
            {"content": "thanks"},
        ],
    )
    async with InProcessExecutor(nats_url, namespace, settings=SETTINGS):
        trace_id = await create_trace(store, "ask", model=ask)
        asked = await wait_for_trace(store, trace_id, waiting)
        names = store.conn.names
        # Bytes that are no event, then an event the fold refuses (no verification pending).
        await store.conn.js.publish(names.subject("trace", trace_id, "human_replied"), b"\xb2{")
        refused = await store.append(
            "trace",
            trace_id,
            [ev.VerificationPassed(attempt=1)],
            expected=Position(asked.stream_seq + 1, asked.version + 1),
        )
        state = await trace_state(store, trace_id)
        assert (state.status, state.wait_reason) == ("waiting", "human")
        assert [(f.type, f.stream_seq) for f in state.faults] == [
            ("", asked.stream_seq + 1),
            ("verification_passed", refused[0].seq),
        ]
        assert "InvalidTransition" in state.faults[1].error
        # The trace goes on: the next append numbers past the skipped events.
        replied = await append_to(store, trace_id, ev.HumanReplied(content="blue"))
        assert replied.version == asked.version + 3
        await wait_for_trace(store, trace_id)
        done = await trace_state(store, trace_id)
        garbage = await trace_state(store, garbage_only)
    assert done.status == "completed" and len(done.faults) == 2
    assert not garbage.exists and len(garbage.faults) == 1


async def test_poison_wake_ups_fail_their_trace_and_do_not_block_others(
    nats_url: str, namespace: str, store: EventStore, tmp_path: Path
) -> None:
    config = test_config(nats_url, namespace, pipeline=PipelineConfig(middleware=[CRASH]))
    healthy_model = record_steps(tmp_path / "steps.yaml", 3, tmp_path / "calls.jsonl")
    async with InProcessExecutor(nats_url, namespace, config=config, settings=SETTINGS) as ex:
        crashing = await create_trace(store, "crash-me", model=healthy_model)
        healthy = await create_trace(store, "three steps", model=healthy_model)
        done = await wait_for_trace(store, healthy)
        failed = await wait_for_trace(store, crashing)
        poisoned = ex.executor.metrics.poison._value.get()
    assert done.status == "completed"
    assert (failed.status, failed.stop_reason) == ("failed", POISON_STOP_REASON)
    assert failed.error is not None and "a bug in an operator's middleware" in failed.error
    assert poisoned >= 1
