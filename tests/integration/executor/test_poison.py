"""Poison wake-ups are terminated and recorded on their trace without blocking other traces."""

from __future__ import annotations

from pathlib import Path

import msgspec
from longhaul.core.index import TraceIndex
from longhaul.core.store import EventStore, Position
from longhaul.domain import events as ev
from longhaul.domain.ids import new_id
from longhaul.executor.poison import POISON_STOP_REASON, raw_position

from tests.integration.executor.scripts import record_steps, write_script
from tests.support.stack import InProcessExecutor, create_trace, wait_for_trace, waiting

SETTINGS = {"tool_modules": ["tests.integration.executor.tooling"], "poison_attempts": 2}


async def failed_raw(store: EventStore, trace_id: str) -> ev.Failed:
    """The poison failure at the end of a log that does not fold."""
    index = TraceIndex(store.conn)
    kv = await store.conn.kv(store.conn.names.traces)
    watcher = await kv.watch(trace_id)
    try:
        while True:
            entry = await watcher.updates(timeout=20)
            if entry is not None and entry.value and b'"failed"' in entry.value:
                break
    finally:
        await watcher.stop()
    found = await raw_position(store, trace_id)
    assert found is not None
    event = ev.decode(found[1])
    assert isinstance(event, ev.Failed)
    indexed = await index.get(trace_id)
    assert indexed is not None and indexed.status == "failed"
    return event


async def test_poison_events_fail_their_trace_and_do_not_block_others(
    nats_url: str, namespace: str, store: EventStore, tmp_path: Path
) -> None:
    undecodable = new_id("t")
    await store.conn.js.publish(
        store.conn.names.subject("trace", undecodable, "trace_created"), b"{not json"
    )
    ask = write_script(
        tmp_path / "ask.yaml",
        [
            {"tool_calls": [{"name": "ask_human", "arguments": {"question": "?"}}]},
        ],
    )
    healthy_model = record_steps(tmp_path / "steps.yaml", 3, tmp_path / "calls.jsonl")
    async with InProcessExecutor(nats_url, namespace, settings=SETTINGS) as ex:
        unfoldable = await create_trace(store, "ask", model=ask)
        asked = await wait_for_trace(store, unfoldable, waiting)
        # An event the fold refuses (no verification pending), written around the store's
        # callers, as a buggy or hostile writer could.
        await store.append(
            "trace",
            unfoldable,
            [ev.VerificationPassed(attempt=1)],
            expected=Position(asked.stream_seq, asked.version),
        )
        healthy = await create_trace(store, "three steps", model=healthy_model)
        done = await wait_for_trace(store, healthy)
        bad_json = await failed_raw(store, undecodable)
        bad_fold = await failed_raw(store, unfoldable)
        poisoned = ex.executor.metrics.poison._value.get()
    assert done.status == "completed"
    assert bad_json.stop_reason == POISON_STOP_REASON and "EventDecodeError" in bad_json.error
    assert bad_fold.stop_reason == POISON_STOP_REASON and "InvalidTransition" in bad_fold.error
    assert poisoned >= 2
    for trace_id in (undecodable, unfoldable):
        subject = store.conn.names.aggregate_filter("trace", trace_id)
        info = await store.conn.js.stream_info(store.conn.names.stream, subjects_filter=subject)
        failures = (info.state.subjects or {}).get(
            store.conn.names.subject("trace", trace_id, "failed"), 0
        )
        assert failures == 1, msgspec.json.encode(info.state.subjects)
