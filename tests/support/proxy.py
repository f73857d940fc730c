"""A TCP proxy on loopback whose connections a test can cut: the client on the other side
sees a real connection reset in the middle of a response, not a mocked exception."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

CHUNK = 65536


class Proxy:
    def __init__(self, upstream_port: int) -> None:
        self.upstream_port = upstream_port
        self.connections = 0
        self._writers: set[asyncio.StreamWriter] = set()
        self._tasks: set[asyncio.Task[None]] = set()
        self.url = ""

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(ConnectionError, OSError):
            while data := await reader.read(CHUNK):
                writer.write(data)
                await writer.drain()
        writer.close()

    async def accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.upstream_port)
        self._writers.update((writer, up_writer))
        pipes = [
            asyncio.create_task(self._pipe(reader, up_writer)),
            asyncio.create_task(self._pipe(up_reader, writer)),
        ]
        self._tasks.update(pipes)
        try:
            await asyncio.gather(*pipes, return_exceptions=True)
        finally:
            self._tasks.difference_update(pipes)
            self._writers.difference_update((writer, up_writer))

    def cut(self) -> int:
        """Reset every open connection (RST, both sides); returns how many were open."""
        writers = list(self._writers)
        for writer in writers:
            writer.transport.abort()
        return len(writers) // 2


@contextlib.asynccontextmanager
async def tcp_proxy(upstream_port: int) -> AsyncIterator[Proxy]:
    proxy = Proxy(upstream_port)
    server = await asyncio.start_server(proxy.accept, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    proxy.url = f"http://127.0.0.1:{port}"
    try:
        yield proxy
    finally:
        server.close()
        proxy.cut()
        for task in list(proxy._tasks):
            task.cancel()
        await asyncio.gather(*proxy._tasks, return_exceptions=True)
        await server.wait_closed()
