"""``longhaul-gateway``: serve the API with uvicorn on ``gateway.host``/``gateway.port``.

Without API keys the gateway is a local development server and binds loopback only, whatever
host was asked for, and says so.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
from collections.abc import Callable
from types import FrameType

import uvicorn
from fastapi import FastAPI
from longhaul.agent.config_check import check_config
from longhaul.core.config import CONFIG_ERROR_EXIT, LonghaulConfig, load_config
from longhaul.core.logs import configure_logging
from longhaul.core.telemetry import tracing
from longhaul.domain.config import ConfigError
from longhaul.gateway.app import create_app
from longhaul.gateway.auth import KeyRing, is_loopback
from longhaul.gateway.redact import redact_uvicorn_logs
from longhaul.gateway.runtime import runtime_of

log = logging.getLogger("longhaul.gateway")

GRACEFUL_SHUTDOWN_S = 5
TICK_S = 0.1
"""uvicorn's tick: the date header and its limits are checked this often."""
ACCEPT_TURNS = 5
"""Loop turns from a connection's accept to its registration: 2 measured on asyncio and uvloop."""


class GatewayServer(uvicorn.Server):
    """uvicorn that ends live streams first when asked to stop.

    uvicorn's graceful shutdown waits for open connections; SSE and WebSocket streams never
    finish on their own, so the stop signal also sets the app's drain event.
    """

    def __init__(self, config: uvicorn.Config, drain: Callable[[], None]) -> None:
        super().__init__(config)
        self._drain = drain
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stopping = asyncio.Event()

    async def serve(self, sockets: list[socket.socket] | None = None) -> None:
        self._loop = asyncio.get_running_loop()
        await super().serve(sockets)

    async def main_loop(self) -> None:
        """uvicorn's ticks, but a stop ends the wait at once instead of at the next tick."""
        counter = 0
        while not await self.on_tick(counter):
            counter = (counter + 1) % 864000
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stopping.wait(), TICK_S)

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        """With no connection or request left to drain, skip uvicorn's fixed pauses (0.1 s
        and more per stop, which a test suite starting hundreds of gateways pays each time)."""
        if not self._nothing_to_drain():
            await super().shutdown(sockets)
            return
        for server in self.servers:
            server.close()
        for sock in sockets or []:
            sock.close()
        # A connection accepted just before the close registers a few loop turns later.
        for _ in range(ACCEPT_TURNS):
            await asyncio.sleep(0)
        if not self._nothing_to_drain():
            await super().shutdown(sockets)  # closing again is harmless; it drains them
            return
        log.info("gateway: shutting down, no connection open")
        for server in self.servers:
            await server.wait_closed()
        await self.lifespan.shutdown()

    def _nothing_to_drain(self) -> bool:
        state = self.server_state
        return not (state.connections or state.tasks or self.force_exit)

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._drain)
            self._loop.call_soon_threadsafe(self._stopping.set)
        super().handle_exit(sig, frame)

    def stop(self) -> None:
        """Stop from inside the event loop (tests, embedding)."""
        self._drain()
        self.should_exit = True
        self._stopping.set()


def bind_host(config: LonghaulConfig) -> str:
    host = config.gateway.host
    if KeyRing(config.gateway.api_keys).open and not is_loopback(host):
        log.warning(
            "no API keys configured (LONGHAUL_API_KEYS): binding 127.0.0.1 instead of %s", host
        )
        return "127.0.0.1"
    return host


def build_server(app: FastAPI, host: str, port: int, *, access_log: bool = False) -> GatewayServer:
    redact_uvicorn_logs()
    config = uvicorn.Config(
        app,
        host=host,
        port=port,
        log_config=None,
        access_log=access_log,
        proxy_headers=False,
        server_header=False,
        timeout_graceful_shutdown=GRACEFUL_SHUTDOWN_S,
        ws_max_size=1 << 20,
    )
    return GatewayServer(config, drain=runtime_of(app).draining.set)


def main() -> None:
    configure_logging("gateway")
    try:
        config = load_config()
        check_config(config)
    except ConfigError as exc:
        log.error("gateway: invalid configuration: %s", exc)
        raise SystemExit(CONFIG_ERROR_EXIT) from None
    host = bind_host(config)
    if KeyRing(config.gateway.api_keys).open:
        log.warning(
            "local development mode: no API keys, loopback only, all requests act as one owner"
        )
    try:
        with tracing("gateway"):  # before the app: it instruments itself when tracing is on
            app = create_app(config)
            log.info("gateway listening on http://%s:%d", host, config.gateway.port)
            build_server(app, host, config.gateway.port).run()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
