"""Reads no event can break: bytes that are no event and an event the fold refuses, published
on a trace's subject with a raw NATS client, are skipped by every read and shown as faults;
GET, /messages, the event stream, stop and the metrics keep working."""

from __future__ import annotations

import asyncio

import httpx
from longhaul.core.index import TraceIndex
from longhaul.core.store import EventStore, Position
from longhaul.domain import events as ev

from tests.integration.gateway.harness import RunningGateway, sse_events, user_message
from tests.support.folds import trace_state


async def test_a_poisoned_log_is_read_around_and_its_faults_are_shown(
    client: httpx.AsyncClient, gateway: RunningGateway, store: EventStore
) -> None:
    trace_id = (await client.post("/api/traces", json={"messages": [user_message("hi")]})).json()[
        "trace_id"
    ]
    names = store.conn.names
    await store.conn.js.publish(names.subject("trace", trace_id, "stopped"), b"\x00\xb2 not json")
    state = await trace_state(store, trace_id)
    await store.append(
        "trace",
        trace_id,
        [ev.HumanReplied(content="nobody asked")],  # the trace is not waiting: refused
        expected=Position(state.stream_seq, state.version),
    )

    view = await client.get(f"/api/traces/{trace_id}")
    assert view.status_code == 200
    body = view.json()
    assert body["status"] == "running" and body["faults"] == 2
    assert [f["type"] for f in body["fault_log"]] == ["", "human_replied"]
    assert all(f["stream_seq"] > 0 for f in body["fault_log"])
    messages = await client.get(f"/api/traces/{trace_id}/messages")
    assert messages.status_code == 200 and len(messages.json()["messages"]) == 1

    stop = await client.post(f"/api/traces/{trace_id}/stop")
    assert stop.status_code == 202
    seen: list[str] = []
    async with (
        asyncio.timeout(30),
        client.stream("GET", f"/api/traces/{trace_id}/events") as response,
    ):
        async for event in sse_events(response):
            if event.id is not None:
                seen.append(event.event)
            if event.event == "stop_requested":
                break
    # The stored events around the broken ones all arrive; the broken ones do not.
    assert seen == ["trace_created", "human_replied", "stop_requested"]

    # Whoever next indexes the trace (an executor, here by hand) carries the count to metrics.
    await TraceIndex(store.conn).update(await trace_state(store, trace_id))
    async with asyncio.timeout(10):
        await gateway.runtime.mirror.wait_until(lambda m: m.entries[trace_id].faults == 2)
    metrics = (await client.get("/metrics")).text
    assert "longhaul_traces_with_faults 1.0" in metrics

    for weird in (b"\xb2", b"abc", b"-1", b"99999999999999999999999"):
        response = await client.get(
            f"/api/traces/{trace_id}/events", headers=[(b"Last-Event-ID", weird)]
        )
        assert response.status_code == 400, weird
