"""``GatewayServer``'s quick stop: it skips uvicorn's fixed pauses only when nothing is left to
drain, and a connection the kernel accepted just before the stop is still answered."""

from __future__ import annotations

import asyncio
import socket
import time
from typing import Any

import pytest
import uvicorn
from longhaul.gateway.main import GatewayServer

START_TIMEOUT_S = 10.0


class RecordingApp:
    """An ASGI app that records the order of what happened to it."""

    def __init__(self) -> None:
        self.happened: list[str] = []

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            while (await receive())["type"] != "lifespan.shutdown":
                await send({"type": "lifespan.startup.complete"})
            self.happened.append("lifespan shut down")
            await send({"type": "lifespan.shutdown.complete"})
            return
        self.happened.append("request served")
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"ok"})


@pytest.mark.parametrize("loop", ["asyncio", "uvloop"])
async def test_a_request_accepted_as_the_stop_comes_is_answered_before_the_app_shuts_down(
    loop: str,
) -> None:
    app = RecordingApp()
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    listener.bind(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_config=None, loop=loop)
    server = GatewayServer(config, drain=lambda: None)
    serving = asyncio.create_task(server.serve(sockets=[listener]))
    deadline = time.monotonic() + START_TIMEOUT_S
    while not server.started:
        assert time.monotonic() < deadline and not serving.done(), "the server did not start"
        await asyncio.sleep(0.01)
    # In the kernel's accept queue, not yet accepted by the event loop, when the stop comes.
    with socket.create_connection(("127.0.0.1", port), timeout=5) as client:
        client.sendall(b"GET / HTTP/1.1\r\nHost: test\r\n\r\n")
        server.stop()
        await asyncio.wait_for(serving, timeout=START_TIMEOUT_S)
        assert client.recv(100).startswith(b"HTTP/1.1 200 OK")
    assert app.happened == ["request served", "lifespan shut down"]
    assert not server.server_state.connections
