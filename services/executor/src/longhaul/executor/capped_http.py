"""An httpx transport that reads at most ``max_bytes`` of any answer's body.

What a remote agent answers is read whole, by ``a2a-sdk`` (``response.json()``) for an A2A
one, by ``longhaul.client`` for another longhaul, so a hostile agent could answer a gigabyte
and fill the executor's memory. Below the SDK, this
transport refuses an answer whose ``Content-Length`` is over the cap before reading it, and
stops reading one without a length as soon as it passes the cap. Every request asks for
``identity`` (the transport sets it) and an answer in another ``Content-Encoding`` is refused
too: a compressed body's size says nothing about what it decompresses to. A refusal raises
:class:`AnswerRefused`, which the caller turns into a clear, final error (not a retry: the
same question would get the same answer).
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx

IDENTITY = {"Accept-Encoding": "identity"}
"""The headers a capped client sends: an uncompressed body is the only one that can be
bounded as it is read."""


class AnswerRefused(Exception):
    """The answer is larger than the cap (or compressed): it is not read."""


class _CappedStream(httpx.AsyncByteStream):
    def __init__(self, inner: httpx.AsyncByteStream, max_bytes: int) -> None:
        self.inner = inner
        self.max_bytes = max_bytes

    async def __aiter__(self) -> AsyncIterator[bytes]:
        received = 0
        async for chunk in self.inner:
            received += len(chunk)
            if received > self.max_bytes:
                raise AnswerRefused(f"answered more than {self.max_bytes} bytes")
            yield chunk

    async def aclose(self) -> None:
        await self.inner.aclose()


class CappedTransport(httpx.AsyncBaseTransport):
    """Every answer's body bounded to ``max_bytes`` (see the module's docstring)."""

    def __init__(self, max_bytes: int, inner: httpx.AsyncBaseTransport | None = None) -> None:
        self.max_bytes = max_bytes
        self.inner = inner or httpx.AsyncHTTPTransport()

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        request.headers.update(IDENTITY)  # whatever the client's defaults ask for
        response = await self.inner.handle_async_request(request)
        encoding = response.headers.get("content-encoding", "identity").strip().lower()
        declared = response.headers.get("content-length", "")
        problem = None
        if encoding not in ("", "identity"):
            problem = f"answered in Content-Encoding {encoding[:40]!r} (only identity is read)"
        elif declared.isdigit() and int(declared) > self.max_bytes:
            problem = f"answered {declared} bytes, more than {self.max_bytes}"
        if problem is not None:
            await response.aclose()
            raise AnswerRefused(problem)
        assert isinstance(response.stream, httpx.AsyncByteStream)
        response.stream = _CappedStream(response.stream, self.max_bytes)
        return response

    async def aclose(self) -> None:
        await self.inner.aclose()
