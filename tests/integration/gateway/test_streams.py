"""SSE and WebSocket streams: ids are stream sequences, resumption loses nothing, token
deltas and heartbeats are interleaved without ids."""

from __future__ import annotations

import asyncio
import gc
import json
from collections.abc import AsyncIterator

import httpx
import msgspec
import pytest
import websockets
from longhaul.agent.contract import LiveUpdate
from longhaul.core.store import EventStore, Position
from longhaul.domain import events as ev

from tests.integration.gateway.harness import (
    RunningGateway,
    SseEvent,
    append_as_executor,
    assistant,
    sse_events,
    user_message,
)
from tests.support.folds import task_state
from tests.support.stack import eventually

DEADLINE_S = 30


async def create(client: httpx.AsyncClient) -> str:
    response = await client.post("/api/traces", json={"messages": [user_message("q")]})
    return str(response.json()["trace_id"])


async def next_stored(stream: AsyncIterator[SseEvent]) -> SseEvent:
    """The next stored event (id-carrying), past heartbeats and deltas."""
    event = await anext(stream)
    while event.id is None:
        event = await anext(stream)
    return event


async def stored_seqs(store: EventStore, trace_id: str) -> list[int]:
    return [r.seq async for r in store.replay("trace", trace_id)]


async def test_event_ids_are_stream_sequences(client: httpx.AsyncClient, store: EventStore) -> None:
    trace_id = await create(client)
    await append_as_executor(store, trace_id, assistant(2, "a"), ev.Completed(summary="s"))
    async with client.stream("GET", f"/api/traces/{trace_id}/events?follow=false") as response:
        assert response.headers["content-type"].startswith("text/event-stream")
        received = [e async for e in sse_events(response)]
    assert [int(e.id or 0) for e in received] == await stored_seqs(store, trace_id)
    assert [e.event for e in received] == ["trace_created", "message_appended", "completed"]
    assert received[1].json()["content"] == "a"


async def test_resume_with_last_event_id_loses_nothing(
    client: httpx.AsyncClient, store: EventStore
) -> None:
    trace_id = await create(client)
    seen: list[SseEvent] = []
    writer_done = asyncio.Event()

    async def executor() -> None:
        # Keeps appending while the client reads, drops, and reconnects.
        for seq in range(2, 22):
            await append_as_executor(store, trace_id, assistant(seq, f"m{seq}", parent=seq - 1))
        writer_done.set()

    async def read(last_event_id: int, stop_after: int | None) -> None:
        headers = {"Last-Event-ID": str(last_event_id)} if last_event_id else {}
        async with client.stream("GET", f"/api/traces/{trace_id}/events", headers=headers) as r:
            count = 0
            async for event in sse_events(r):
                if event.id is None:
                    continue
                seen.append(event)
                count += 1
                if stop_after is not None and count == stop_after:
                    return  # the connection drops mid-stream
                if len(seen) == 21:
                    return

    writer = asyncio.create_task(executor())
    async with asyncio.timeout(DEADLINE_S):
        await read(0, stop_after=3)
        await read(int(seen[-1].id or 0), stop_after=5)
        await writer_done.wait()
        await read(int(seen[-1].id or 0), stop_after=None)
    await writer
    ids = [int(e.id or 0) for e in seen]
    assert ids == await stored_seqs(store, trace_id)
    assert len(ids) == len(set(ids)) == 21


async def test_after_query_parameter_and_header_precedence(
    client: httpx.AsyncClient, store: EventStore
) -> None:
    trace_id = await create(client)
    await append_as_executor(store, trace_id, assistant(2, "a"), assistant(3, "b"))
    seqs = await stored_seqs(store, trace_id)
    url = f"/api/traces/{trace_id}/events?follow=false"
    async with client.stream("GET", f"{url}&after={seqs[0]}") as response:
        assert [int(e.id or 0) async for e in sse_events(response)] == seqs[1:]
    headers = {"Last-Event-ID": str(seqs[1])}
    async with client.stream("GET", f"{url}&after={seqs[0]}", headers=headers) as response:
        assert [int(e.id or 0) async for e in sse_events(response)] == seqs[2:]


async def test_live_deltas_and_heartbeats_are_interleaved_without_ids(
    client: httpx.AsyncClient, store: EventStore, gateway: RunningGateway
) -> None:
    trace_id = await create(client)
    nc = gateway.runtime.service.conn.nc
    live_subject = gateway.runtime.service.conn.names.live(trace_id)
    async with (
        asyncio.timeout(DEADLINE_S),
        client.stream("GET", f"/api/traces/{trace_id}/events") as response,
    ):
        stream = sse_events(response)
        first = await next_stored(stream)
        assert first.event == "trace_created"
        # The subscription is open before the first event is sent, so these all arrive.
        await nc.publish(live_subject, b"not json at all")
        for text in ("Hel", "lo"):
            update = LiveUpdate(kind="delta", text=text, sequence=2)
            await nc.publish(live_subject, msgspec.json.encode(update))
        live: list[SseEvent] = []
        while len(live) < 2:  # a heartbeat may come first on a slow machine
            event = await anext(stream)
            if event.event == "live":
                live.append(event)
        assert [(e.id, e.json()["text"]) for e in live] == [(None, "Hel"), (None, "lo")]
        heartbeat = await anext(stream)
        assert heartbeat.event == "heartbeat" and heartbeat.id is None
        await append_as_executor(store, trace_id, assistant(2, "Hello"))
        event = await next_stored(stream)
        assert event.event == "message_appended"
        assert int(event.id or 0) == (await stored_seqs(store, trace_id))[-1]


async def test_websocket_carries_the_same_content(
    client: httpx.AsyncClient, store: EventStore, gateway: RunningGateway
) -> None:
    trace_id = await create(client)
    await append_as_executor(store, trace_id, assistant(2, "a"))
    seqs = await stored_seqs(store, trace_id)
    url = gateway.url.replace("http://", "ws://") + f"/api/traces/{trace_id}/watch"
    conn = gateway.runtime.service.conn
    async with asyncio.timeout(DEADLINE_S), websockets.connect(url) as ws:
        frames = [json.loads(await ws.recv()) for _ in range(2)]
        assert [(f["id"], f["event"]) for f in frames] == [
            (seqs[0], "trace_created"),
            (seqs[1], "message_appended"),
        ]
        await conn.nc.publish(
            conn.names.live(trace_id), msgspec.json.encode(LiveUpdate(kind="delta", text="x"))
        )
        frame = json.loads(await ws.recv())
        while frame["event"] == "heartbeat":  # one may come first on a slow machine
            frame = json.loads(await ws.recv())
        assert frame == {"event": "live", "data": {"kind": "delta", "text": "x"}}
        heartbeat = json.loads(await ws.recv())
        assert heartbeat["event"] == "heartbeat" and "id" not in heartbeat
    async with asyncio.timeout(DEADLINE_S), websockets.connect(f"{url}?after={seqs[0]}") as ws:
        assert json.loads(await ws.recv())["id"] == seqs[1]


async def test_task_events_stream_planner_progress(
    client: httpx.AsyncClient, store: EventStore
) -> None:
    created = await client.post("/api/tasks", json={"goal": "write a report"})
    assert created.status_code == 202
    task_id = created.json()["task_id"]
    state = await task_state(store, task_id)
    await store.append(
        "task",
        task_id,
        [
            ev.PlanCreated(phases=[ev.PhaseSpec(id="p1", name="research")]),
            ev.PhaseStarted(phase_id="p1", trace_ids=["t_step"]),
        ],
        expected=Position(state.stream_seq, state.version),
    )
    for prefix in ("/api/tasks", "/api/v1/tasks"):
        async with client.stream("GET", f"{prefix}/{task_id}/events?follow=false") as response:
            received = [e async for e in sse_events(response)]
        assert [e.event for e in received] == ["task_created", "plan_created", "phase_started"]
        assert all(e.id is not None for e in received)


async def test_streams_end_when_the_gateway_stops(gateway: RunningGateway) -> None:
    async with gateway.client() as http:
        trace_id = await create(http)
        async with (
            asyncio.timeout(DEADLINE_S),
            http.stream("GET", f"/api/traces/{trace_id}/events") as response,
        ):
            stream = sse_events(response)
            assert (await next_stored(stream)).event == "trace_created"
            gateway.server.stop()
            with pytest.raises(StopAsyncIteration):
                while True:
                    await anext(stream)


async def test_a_stream_the_client_left_lets_go_of_its_subscriptions(
    gateway: RunningGateway, store: EventStore
) -> None:
    """A follow holds an ordered consumer and a live-delta subscription; once the client
    leaves, both are unsubscribed at once, not when the garbage collector finds them (an
    ordered consumer with unread events held the shutdown's drain for nats-py's 30 s). The
    collector is off here, so only an explicit close can pass."""
    nc = gateway.runtime.service.conn.nc
    async with gateway.client() as http:
        trace_id = await create(http)
        names = gateway.runtime.service.conn.names
        live_subject = names.live(trace_id)
        events_subject = names.aggregate_filter("trace", trace_id)

        def held() -> list[str]:
            """This trace's subscriptions only: the gateway's own watches come and go meanwhile
            (the schedule ticker lists its bucket through a short-lived one every half second)."""
            return [
                sub.subject
                for sub in nc._subs.values()
                if sub.subject == live_subject
                or (sub._jsi is not None and sub._jsi._ccreq.filter_subject == events_subject)
            ]

        gc.disable()
        try:
            async with asyncio.timeout(DEADLINE_S):
                async with http.stream("GET", f"/api/traces/{trace_id}/events") as response:
                    stream = sse_events(response)
                    assert (await next_stored(stream)).event == "trace_created"
                    assert len(held()) == 2
                await append_as_executor(store, trace_id, assistant(2, "a"))

            async def released() -> bool:
                return not held()

            await eventually(released, within=DEADLINE_S)
        finally:
            gc.enable()
