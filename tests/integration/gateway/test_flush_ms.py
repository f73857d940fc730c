"""``?flush_ms=`` through the stack: one model answer streamed by an executor to three
watchers of the same trace at once. The executor publishes every chunk (its own
``flush_interval_ms`` is 0); a watcher that asked for 500 ms windows, on SSE or on the
WebSocket, gets far fewer, larger ``live`` frames whose texts still join to the answer
exactly. Out-of-range values are refused with 422 on both transports."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
import websockets
from longhaul.domain.config import PipelineConfig, StreamingConfig

from tests.integration.gateway.harness import RunningGateway, sse_events, user_message
from tests.support.llm_fakes import Call, FakeOpenAI, Reply
from tests.support.stack import InProcessExecutor, test_config

DEADLINE_S = 30
ANSWER = "".join(f"w{n:02d} " for n in range(60))  # 240 characters, 60 chunks of 4
WINDOW_MS = 500


@pytest.fixture
async def fake() -> AsyncIterator[FakeOpenAI]:
    script = [
        Reply(tool_calls=[Call("ask_human", {"question": "shall I answer?"})]),
        Reply(text=ANSWER, chunk=4, interval_s=0.02),  # at least 1.2 s of output
    ]
    async with FakeOpenAI(script=script) as server:
        yield server


@pytest.fixture
async def executor(
    gateway: RunningGateway, fake: FakeOpenAI, nats_url: str, namespace: str, tmp_path: Path
) -> AsyncIterator[InProcessExecutor]:
    every_chunk = PipelineConfig(streaming=StreamingConfig(flush_interval_ms=0))
    config = test_config(nats_url, namespace, models=fake.models_config(), pipeline=every_chunk)
    async with InProcessExecutor(
        nats_url, namespace, "exec-flush", config=config, settings={"working_root": tmp_path}
    ) as running:
        yield running


async def sse_deltas(
    client: httpx.AsyncClient, trace_id: str, flush_ms: int, ready: asyncio.Event
) -> list[str]:
    """The delta texts of one SSE watcher, until the trace completes."""
    texts: list[str] = []
    url = f"/api/traces/{trace_id}/events?flush_ms={flush_ms}"
    async with client.stream("GET", url) as response:
        async for event in sse_events(response):
            if event.event == "waiting":
                ready.set()
            elif event.event == "live" and event.json()["kind"] == "delta":
                texts.append(event.json()["text"])
            elif event.event == "completed":
                return texts
    raise AssertionError("stream ended early")


async def ws_deltas(url: str, ready: asyncio.Event) -> list[str]:
    texts: list[str] = []
    async with websockets.connect(url) as ws:
        async for raw in ws:
            frame = json.loads(raw)
            if frame["event"] == "waiting":
                ready.set()
            elif frame["event"] == "live" and frame["data"]["kind"] == "delta":
                texts.append(frame["data"]["text"])
            elif frame["event"] == "completed":
                return texts
    raise AssertionError("socket closed early")


@pytest.mark.usefixtures("executor")
async def test_each_watcher_gets_deltas_at_the_interval_it_chose(
    client: httpx.AsyncClient, gateway: RunningGateway, fake: FakeOpenAI
) -> None:
    created = await client.post(
        "/api/traces",
        json={
            "messages": [user_message("answer when I say so")],
            "model": "openai:fake-model",
            "tools": ["ask_human"],
        },
    )
    trace_id = created.json()["trace_id"]
    ws_url = gateway.url.replace("http://", "ws://") + f"/api/traces/{trace_id}/watch"
    ready = [asyncio.Event() for _ in range(3)]
    async with asyncio.timeout(DEADLINE_S):
        watchers = [
            asyncio.create_task(sse_deltas(client, trace_id, 0, ready[0])),
            asyncio.create_task(sse_deltas(client, trace_id, WINDOW_MS, ready[1])),
            asyncio.create_task(ws_deltas(f"{ws_url}?flush_ms={WINDOW_MS}", ready[2])),
        ]
        # every watcher is subscribed (it has seen the wait) before the answer streams
        await asyncio.gather(*(event.wait() for event in ready))
        reply = await client.post(f"/api/traces/{trace_id}/reply", json={"content": "go"})
        assert reply.status_code == 202
        every, sse_batched, ws_batched = await asyncio.gather(*watchers)

    assert fake.rejected == []
    assert len(every) == len(ANSWER) // 4  # the executor's chunks, one frame each
    for batched in (sse_batched, ws_batched):
        assert "".join(batched) == ANSWER  # merged, nothing lost or reordered
        assert 2 <= len(batched) <= len(every) // 4, batched
    assert "".join(every) == ANSWER


async def test_an_out_of_range_flush_ms_is_refused_with_422(
    client: httpx.AsyncClient, gateway: RunningGateway
) -> None:
    created = await client.post("/api/traces", json={"messages": [user_message("q")]})
    trace_id = created.json()["trace_id"]
    for value in ("-1", "10001", "soon"):
        response = await client.get(f"/api/traces/{trace_id}/events?flush_ms={value}")
        assert response.status_code == 422, value
        error = response.json()["error"]
        assert error["code"] == "invalid_request"
        assert error["details"][0]["loc"] == ["query", "flush_ms"]
    ws_url = gateway.url.replace("http://", "ws://") + f"/api/traces/{trace_id}/watch"
    for value in ("10001", "-5", "soon"):
        async with (
            asyncio.timeout(DEADLINE_S),
            websockets.connect(f"{ws_url}?flush_ms={value}") as ws,
        ):
            refusal = json.loads(await ws.recv())
            with pytest.raises(websockets.ConnectionClosed):
                await ws.recv()
        assert refusal["error"]["code"] == "invalid_request"
        assert "flush_ms must be an integer from 0 to 10000" in refusal["error"]["message"]
        assert ws.close_code == 4422
