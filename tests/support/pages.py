"""A tiny real HTTP server on loopback serving fixed pages, for webfetch tests.

``/`` redirects to ``/page`` (a small HTML page); ``pages`` maps other paths to a content type
and body, ``redirects`` to a ``Location``, ``headers`` to extra response headers (a
``Content-Encoding``). It records the ``Host`` and ``Accept-Encoding`` of every request.
"""

from __future__ import annotations

import asyncio

Page = tuple[str, bytes]
"""Content-Type and body."""


class LocalSite:
    """A tiny real HTTP server on loopback: / redirects to /page, which serves HTML; other
    paths serve ``pages``."""

    def __init__(
        self,
        pages: dict[str, Page] | None = None,
        redirects: dict[str, str] | None = None,
        headers: dict[str, dict[str, str]] | None = None,
    ) -> None:
        self.pages = pages or {}
        self.redirects = {"/": "/page", **(redirects or {})}
        self.headers = headers or {}
        self.hosts: list[str] = []
        self.accept_encodings: list[str] = []
        self.server: asyncio.Server | None = None

    async def __aenter__(self) -> str:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        port = self.server.sockets[0].getsockname()[1]
        return f"http://localhost:{port}/"

    async def __aexit__(self, *exc: object) -> None:
        assert self.server is not None
        self.server.close()
        await self.server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = (await reader.readuntil(b"\r\n\r\n")).decode()
        except asyncio.IncompleteReadError:  # a browser's spare connection, closed unused
            writer.close()
            return
        path = head.split(" ", 2)[1]
        lines = head.split("\r\n")
        self.hosts += [line[6:] for line in lines if line.lower().startswith("host:")]
        self.accept_encodings += [
            line.split(":", 1)[1].strip()
            for line in lines
            if line.lower().startswith("accept-encoding:")
        ]
        if path in self.redirects:
            location = self.redirects[path]
            writer.write(
                f"HTTP/1.1 302 Found\r\nLocation: {location}\r\nContent-Length: 0\r\n\r\n".encode()
            )
        else:
            kind, body = self.pages.get(
                path,
                (
                    "text/html; charset=utf-8",
                    b"<html><body><h1>Local</h1><p>hello</p></body></html>",
                ),
            )
            extra = "".join(f"{k}: {v}\r\n" for k, v in self.headers.get(path, {}).items())
            head = (
                f"HTTP/1.1 200 OK\r\nContent-Type: {kind}\r\nContent-Length: {len(body)}\r\n"
                f"{extra}\r\n"
            )
            writer.write(head.encode() + body)
        await writer.drain()
        writer.close()
