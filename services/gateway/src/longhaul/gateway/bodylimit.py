"""Request-body limit, enforced while the body arrives (chunked uploads included).

The body is buffered up to ``max_body_bytes`` before the app sees it, so an oversized request
is answered 413 before any handler runs (and before anything can be appended), whatever the
``Content-Length`` header claims. Requests without a body pass through untouched, which keeps
streams' disconnect notifications flowing.

File uploads (up to ``max_upload_bytes``) are not buffered here: they pass through counted, so
the route authenticates and checks the trace before it reads a byte (an anonymous caller must
not make the gateway hold 25 MB per connection), and a body that outgrows the limit while it is
read is a 413 then.

Also: ``curl -d '{…}'`` sends ``application/x-www-form-urlencoded`` unless told otherwise.
The API takes no forms, so such a body is handed on as JSON, which makes the documented curl
one-liners work as written.
"""

from __future__ import annotations

import asyncio
import contextlib

from longhaul.gateway.errors import ApiError, shaped_error
from starlette.datastructures import Headers
from starlette.requests import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

FORM = b"application/x-www-form-urlencoded"
DRAIN_BYTES = 16 * 1024 * 1024
DRAIN_TIMEOUT_S = 5.0


UPLOAD_SUFFIX = "/files"
IMPORT_PATH = "/api/traces/import"
"""A bundle is an upload too: counted as it arrives, read by the route after it checked
the caller."""


class BodyLimitMiddleware:
    """``max_body_bytes`` for every request but file uploads (``POST …/files``) and bundle
    imports, which may carry ``max_upload_bytes``."""

    def __init__(self, app: ASGIApp, max_body_bytes: int, max_upload_bytes: int = 0) -> None:
        self.app = app
        self.max_body_bytes = max_body_bytes
        self.max_upload_bytes = max_upload_bytes
        self.drain_bytes = max(DRAIN_BYTES, 2 * max_body_bytes)

    def _upload(self, scope: Scope) -> bool:
        return bool(self.max_upload_bytes) and (
            scope.get("method") == "POST"
            and (
                str(scope.get("path", "")).endswith(UPLOAD_SUFFIX)
                or scope.get("path") == IMPORT_PATH
            )
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        upload = self._upload(scope)
        limit = self.max_upload_bytes if upload else self.max_body_bytes
        declared = headers.get("content-length")
        chunked = "chunked" in headers.get("transfer-encoding", "").lower()
        if declared is None and not chunked:
            await self.app(scope, receive, send)
            return
        if declared is not None:
            if not declared.strip().isdigit():
                await shaped_error(
                    400, "bad_request", "invalid Content-Length", request=Request(scope)
                )(scope, receive, send)
                return
            if int(declared) > limit:
                if int(declared) <= self.drain_bytes:
                    await self._drain(receive, 0)
                await self._too_large(scope, receive, send, limit)
                return
        if upload:
            await self.app(scope, _counted(receive, limit), send)
            return
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > limit:
                if message.get("more_body", False):
                    await self._drain(receive, size)
                await self._too_large(scope, receive, send, limit)
                return
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        if headers.get("content-type", "").encode().lower().startswith(FORM):
            scope = dict(scope)
            scope["headers"] = [
                (name, b"application/json" if name == b"content-type" else value)
                for name, value in scope["headers"]
            ]
        await self.app(scope, replay, send)

    async def _drain(self, receive: Receive, size: int) -> None:
        """Read and discard the rest of a refused body (bounded in bytes and time) before
        answering: a client still uploading when the server answers and closes gets a reset
        instead of the 413. Nothing is kept, so the memory bound holds."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(DRAIN_TIMEOUT_S):
                while size <= self.drain_bytes:
                    message = await receive()
                    if message["type"] != "http.request":
                        return
                    size += len(message.get("body", b""))
                    if not message.get("more_body", False):
                        return

    async def _too_large(self, scope: Scope, receive: Receive, send: Send, limit: int) -> None:
        response = shaped_error(
            413,
            "body_too_large",
            f"request body exceeds {limit} bytes",
            {"max_body_bytes": limit},
            headers={"Connection": "close"},
            request=Request(scope),
        )
        await response(scope, receive, send)


def _counted(receive: Receive, limit: int) -> Receive:
    """``receive`` that refuses the chunk taking the body past ``limit`` (a 413 raised in
    whoever reads it: a chunked upload declares no length to check up front)."""
    size = 0

    async def counted() -> Message:
        nonlocal size
        message = await receive()
        size += len(message.get("body", b""))
        if size > limit:
            raise ApiError(
                413,
                "body_too_large",
                f"request body exceeds {limit} bytes",
                details={"max_body_bytes": limit},
                headers={"Connection": "close"},
            )
        return message

    return counted
