"""A real gateway for tests: uvicorn on a random loopback port inside the test's event loop,
talking to the session's nats-server under the test's namespace."""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import httpx
from fastapi import FastAPI
from longhaul.core.config import GatewayConfig, LonghaulConfig, NatsConfig
from longhaul.core.store import EventStore, Position
from longhaul.domain import events as ev
from longhaul.gateway.app import create_app
from longhaul.gateway.main import GatewayServer, build_server
from longhaul.gateway.runtime import Runtime, runtime_of

from tests.support.folds import trace_state

START_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 40.0
"""Bounds, not figures: a gateway may legitimately take uvicorn's 5 s graceful shutdown, the
background tasks' 10 s cancel and the NATS drain's 5 s to stop (a loaded box stretches all)."""
KEY_A = "gateway-key-a"
KEY_B = "gateway-key-b"
"""The two API keys of the ``keyed_stack`` fixture."""


@dataclass
class RunningGateway:
    url: str
    app: FastAPI
    server: GatewayServer

    @property
    def runtime(self) -> Runtime:
        return runtime_of(self.app)

    def client(self, key: str | None = None, **kwargs: Any) -> httpx.AsyncClient:
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        kwargs.setdefault("timeout", 10.0)
        return httpx.AsyncClient(base_url=self.url, headers=headers, **kwargs)


def gateway_config(nats: NatsConfig, **gateway: Any) -> LonghaulConfig:
    return LonghaulConfig(nats=nats, gateway=GatewayConfig(**gateway))


@contextlib.asynccontextmanager
async def serve_gateway(
    config: LonghaulConfig,
    *,
    heartbeat_s: float = 15.0,
    host: str = "127.0.0.1",
    port: int = 0,
) -> AsyncIterator[RunningGateway]:
    """Serve ``config``'s gateway on ``port`` (0: a free one; a fixed one to restart it)."""
    app = create_app(config, heartbeat_s=heartbeat_s)
    # IPPROTO_TCP explicitly: asyncio only sets TCP_NODELAY on accepted sockets whose proto
    # says TCP, and with Nagle on every keep-alive response waits ~40 ms for a delayed ACK.
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    port = sock.getsockname()[1]
    server = build_server(app, host, port)
    task = asyncio.create_task(server.serve(sockets=[sock]))
    deadline = time.monotonic() + START_TIMEOUT_S
    while not server.started:
        if task.done():
            task.result()
            raise RuntimeError("gateway exited during start-up")
        if time.monotonic() > deadline:
            raise TimeoutError("gateway did not start")
        await asyncio.sleep(0.01)
    try:
        address = "127.0.0.1" if host == "0.0.0.0" else host
        yield RunningGateway(f"http://{address}:{port}", app, server)
    finally:
        server.stop()
        await asyncio.wait_for(task, timeout=STOP_TIMEOUT_S)
        sock.close()


async def append_as_executor(store: EventStore, trace_id: str, *events: ev.TraceEvent) -> int:
    """Append what an executor would (assistant messages, waits, completion) so API paths can
    be exercised without one; returns the stream sequence of the last event."""
    state = await trace_state(store, trace_id)
    recorded = await store.append(
        "trace",
        trace_id,
        list(events),
        expected=Position(state.stream_seq, state.version),
        actor="executor:test",
    )
    return recorded[-1].seq


def assistant(sequence: int, text: str, parent: int | None = None) -> ev.MessageAppended:
    return ev.MessageAppended(
        sequence=sequence,
        parent_sequence=sequence - 1 if parent is None else parent,
        role="assistant",
        content=text,
    )


def user_message(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


@dataclass
class SseEvent:
    event: str
    data: str
    id: str | None = None

    def json(self) -> Any:
        return json.loads(self.data)


async def sse_events(response: httpx.Response) -> AsyncIterator[SseEvent]:
    """Parse a ``text/event-stream`` body (comments and ``retry:`` lines skipped)."""
    fields: dict[str, str] = {}
    async for line in response.aiter_lines():
        if line == "":
            if "data" in fields:
                yield SseEvent(fields.get("event", "message"), fields["data"], fields.get("id"))
            fields = {}
        elif not line.startswith(":"):
            name, _, value = line.partition(":")
            fields[name] = value[1:] if value.startswith(" ") else value
