"""``longhaul.client`` against a real gateway and executor: typed answers, refusals as
exceptions with status and code, settings from the environment, and event streams that
resume after a connection really drops (a reset through a proxy, a gateway restart), for the
sync and the async client alike."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from longhaul.client import (
    AsyncClient,
    Client,
    Conflict,
    Event,
    InvalidRequest,
    NotFound,
    Unauthorized,
    Unreachable,
)
from longhaul.core.config import NatsConfig

from tests.integration.gateway.harness import RunningGateway, gateway_config, serve_gateway
from tests.support.proxy import tcp_proxy
from tests.support.stack import InProcessExecutor

FLAVOURS = ["sync", "async"]
DEADLINE_S = 60.0


async def using(
    flavour: str, url: str, method: str, *args: Any, api_key: str | None = None, **kwargs: Any
) -> Any:
    """``client.<method>(*args, **kwargs)`` with a fresh sync (in a thread) or async client."""
    if flavour == "sync":

        def blocking() -> Any:
            with Client(url, api_key) as client:
                return getattr(client, method)(*args, **kwargs)

        return await asyncio.to_thread(blocking)
    async with AsyncClient(url, api_key) as client:
        return await getattr(client, method)(*args, **kwargs)


@pytest.mark.parametrize("flavour", FLAVOURS)
async def test_a_trace_from_start_to_answer(stack: RunningGateway, flavour: str) -> None:
    info = await using(flavour, stack.url, "info")
    assert info.offline and info.default_model == "scripted:auto"
    accepted = await using(
        flavour, stack.url, "create_trace", "list my files", tools=["glob"], name=flavour
    )
    assert accepted.trace_id.startswith("t_") and accepted.event_id > 0
    async with asyncio.timeout(DEADLINE_S):
        trace = await using(flavour, stack.url, "wait", accepted.trace_id)
    assert trace.status == "completed" and trace.is_final and trace.name == flavour
    assert trace.totals.tokens > 0 and trace.event_id > accepted.event_id
    conversation = await using(flavour, stack.url, "messages", accepted.trace_id)
    roles = [m.role for m in conversation.messages]
    assert roles[:2] == ["user", "assistant"] and roles[-1] == "assistant"
    assert conversation.messages[1].tool_calls[0].function.name == "glob"
    assert conversation.messages[-1].text
    last = await using(flavour, stack.url, "messages", accepted.trace_id, before=2**53, limit=2)
    assert [m.sequence for m in last.messages] == [m.sequence for m in conversation.messages[-2:]]
    listed = await using(flavour, stack.url, "list_traces", status="completed")
    assert accepted.trace_id in [t.trace_id for t in listed.traces]


@pytest.mark.parametrize("flavour", FLAVOURS)
async def test_a_deleted_trace_is_unknown_afterwards(stack: RunningGateway, flavour: str) -> None:
    trace_id = (await using(flavour, stack.url, "create_trace", "x", tools=["glob"])).trace_id
    async with asyncio.timeout(DEADLINE_S):
        await using(flavour, stack.url, "wait", trace_id)
    deleted = await using(flavour, stack.url, "delete", trace_id)
    assert deleted.deleted == [trace_id] and deleted.events > 0
    for method in ("get_trace", "delete"):
        with pytest.raises(NotFound):
            await using(flavour, stack.url, method, trace_id)


@pytest.mark.parametrize("flavour", FLAVOURS)
async def test_uploaded_files_reach_the_working_directory(
    stack: RunningGateway, flavour: str
) -> None:
    trace_id = (await using(flavour, stack.url, "create_trace", "x", tools=["glob"])).trace_id
    async with asyncio.timeout(DEADLINE_S):
        await using(flavour, stack.url, "wait", trace_id)
    content = f"{flavour} bytes\n".encode()
    uploaded = await using(flavour, stack.url, "upload_files", trace_id, {"data.txt": content})
    assert [(f.name, f.size) for f in uploaded.files] == [("data.txt", len(content))]
    await using(flavour, stack.url, "run", trace_id, "read data.txt")
    async with asyncio.timeout(DEADLINE_S):
        trace = await using(flavour, stack.url, "wait", trace_id)
    events = await _stored(stack.url, trace_id)
    delivered = [e.data for e in events if e.event == "files_delivered"]
    assert trace.status == "completed" and delivered and "data.txt" in delivered[0]["names"]


async def test_stored_events_in_order_without_follow(stack: RunningGateway) -> None:
    async with AsyncClient(stack.url) as client:
        trace_id = (await client.create_trace("q", tools=["glob"])).trace_id
        async with asyncio.timeout(DEADLINE_S):
            await client.wait(trace_id)
        events = [e async for e in client.events(trace_id, follow=False)]
    ids = [e.id for e in events]
    assert events[0].event == "trace_created" and events[-1].event == "completed"
    assert all(i is not None for i in ids) and ids == sorted(set(ids))  # type: ignore[type-var]


@pytest.mark.parametrize("flavour", FLAVOURS)
async def test_refusals_are_exceptions_with_status_and_code(
    stack: RunningGateway, flavour: str
) -> None:
    with pytest.raises(NotFound) as missing:
        await using(flavour, stack.url, "get_trace", "t_nope")
    assert missing.value.status == 404 and missing.value.code == "not_found"
    with pytest.raises(InvalidRequest) as invalid:
        await using(flavour, stack.url, "create_trace", "x", model="no model")
    assert invalid.value.status == 422 and invalid.value.code == "invalid_request"
    assert "model" in str(invalid.value.details)
    trace_id = (await using(flavour, stack.url, "create_trace", "x", tools=["glob"])).trace_id
    async with asyncio.timeout(DEADLINE_S):
        await using(flavour, stack.url, "wait", trace_id)
    with pytest.raises(Conflict) as conflict:
        await using(flavour, stack.url, "reply", trace_id, "nobody asked")
    assert conflict.value.status == 409 and conflict.value.code == "conflict"
    closed = f"http://127.0.0.1:{(httpx.URL(stack.url).port or 1) + 1}"
    with pytest.raises(Unreachable):
        await using(flavour, closed, "info")


@pytest.mark.parametrize("flavour", FLAVOURS)
async def test_api_key_and_url_from_the_environment(
    nats_config: NatsConfig, flavour: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with serve_gateway(gateway_config(nats_config, api_keys="sdk-secret")) as gateway:
        monkeypatch.setenv("LONGHAUL_URL", gateway.url)
        monkeypatch.delenv("LONGHAUL_API_KEY", raising=False)
        with pytest.raises(Unauthorized) as refused:
            await using(flavour, "", "info")
        assert refused.value.status == 401 and refused.value.code == "unauthorized"
        with pytest.raises(Unauthorized):
            await using(flavour, "", "info", api_key="wrong")
        monkeypatch.setenv("LONGHAUL_API_KEY", "sdk-secret")
        info = await using(flavour, "", "info")
    assert info.auth is True and info.owner


def _consume_sync(url: str, trace_id: str, on_waiting: Callable[[], None]) -> list[Event]:
    seen: list[Event] = []
    with Client(url) as client:
        for event in client.events(trace_id):
            seen.append(event)
            if event.event == "waiting":
                on_waiting()
            if event.event == "completed":
                return seen
    raise AssertionError("the stream ended before the trace")


async def _consume_async(url: str, trace_id: str, on_waiting: Callable[[], Any]) -> list[Event]:
    seen: list[Event] = []
    async with AsyncClient(url) as client:
        async for event in client.events(trace_id):
            seen.append(event)
            if event.event == "waiting":
                await on_waiting()
            if event.event == "completed":
                return seen
    raise AssertionError("the stream ended before the trace")


async def _stored(url: str, trace_id: str) -> list[Event]:
    async with AsyncClient(url) as client:
        return [e async for e in client.events(trace_id, follow=False)]


def _assert_whole_log(seen: list[Event], stored: list[Event]) -> None:
    """Every stored event exactly once, in order: nothing lost or repeated by the resume."""
    assert [e.id for e in seen if e.id is not None] == [e.id for e in stored]
    assert [e.event for e in seen if e.id is not None] == [e.event for e in stored]
    assert "human_replied" in [e.event for e in stored]


@pytest.mark.parametrize("flavour", FLAVOURS)
async def test_stream_resumes_after_the_connection_is_reset(
    stack: RunningGateway, flavour: str
) -> None:
    """The trace waits for a reply; the proxy resets the stream's connection; the reply is
    given meanwhile; the stream reconnects with Last-Event-ID and sees the rest."""
    async with tcp_proxy(httpx.URL(stack.url).port or 0) as proxy:
        async with AsyncClient(stack.url) as direct:
            trace_id = (await direct.create_trace("ask me", tools=["ask_human"])).trace_id
        cuts: list[int] = []

        async def cut_and_reply() -> None:
            cuts.append(proxy.connections)
            assert proxy.cut() >= 1
            async with AsyncClient(stack.url) as replier:
                await replier.reply(trace_id, "blue")

        loop = asyncio.get_running_loop()
        async with asyncio.timeout(DEADLINE_S):
            if flavour == "sync":

                def on_waiting() -> None:
                    asyncio.run_coroutine_threadsafe(cut_and_reply(), loop).result(DEADLINE_S)

                seen = await asyncio.to_thread(_consume_sync, proxy.url, trace_id, on_waiting)
            else:
                seen = await _consume_async(proxy.url, trace_id, cut_and_reply)
        assert cuts and proxy.connections > cuts[0], "the stream never reconnected"
    _assert_whole_log(seen, await _stored(stack.url, trace_id))


async def test_stream_follows_the_gateway_through_a_restart(
    nats_config: NatsConfig, nats_url: str, namespace: str, tmp_path: Path
) -> None:
    """The gateway stops while a client follows a waiting trace and comes back on the same
    port; the client reconnects by itself (refused connections in between) and resumes."""
    config = gateway_config(nats_config)
    async with contextlib.AsyncExitStack() as stack:
        await stack.enter_async_context(
            InProcessExecutor(
                nats_url, namespace, "exec-sdk", settings={"working_root": tmp_path / "work"}
            )
        )
        first = serve_gateway(config, heartbeat_s=1.0)
        gateway = await first.__aenter__()
        port = httpx.URL(gateway.url).port or 0
        client = await stack.enter_async_context(AsyncClient(gateway.url))
        trace_id = (await client.create_trace("ask me", tools=["ask_human"])).trace_id
        stream = client.events(trace_id)
        seen: list[Event] = []
        async with asyncio.timeout(DEADLINE_S):
            async for event in stream:
                seen.append(event)
                if event.event == "waiting":
                    break
            await first.__aexit__(None, None, None)
            with pytest.raises(Unreachable):
                await client.info()
            second = await stack.enter_async_context(
                serve_gateway(config, heartbeat_s=1.0, port=port)
            )
            await client.reply(trace_id, "blue")
            async for event in stream:
                seen.append(event)
                if event.event == "completed":
                    break
        _assert_whole_log(seen, await _stored(second.url, trace_id))
