"""The HTTP side every remote provider shares: limits, retries, SSE, error mapping.

A provider is a :class:`Codec` (request building and stream decoding, pure and wire-format
specific); :class:`HttpModel` runs it against an :class:`Endpoint`. Retrying lives here once:
an attempt that failed before any text or tool-call fragment reached the caller is retried
(after a :class:`RetryNotice` on the stream); once output was delivered a retry would
duplicate it, so the call fails with ``ModelError(partial_output=True)`` instead.
"""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator, AsyncIterator
from contextlib import aclosing
from dataclasses import dataclass, field
from typing import Any, Protocol

import httpx
import msgspec
from longhaul.llm.assembly import ResponseAssembler
from longhaul.llm.base import StreamingModel
from longhaul.llm.estimate import estimate_prompt_tokens
from longhaul.llm.fallback import outage_reason
from longhaul.llm.limits import CallLimits
from longhaul.llm.retry import (
    RetryPolicy,
    describe_status,
    is_retryable_status,
    outage_of_status,
    parse_retry_after,
)
from longhaul.llm.sse import SSEEvent, iter_sse
from longhaul.llm.types import (
    ModelError,
    ModelRequest,
    RetryNotice,
    StreamEnd,
    StreamEvent,
    TextDelta,
    ToolCallDelta,
)


@dataclass(frozen=True)
class HttpCall:
    """One POST: a path relative to the endpoint's base URL and a JSON body."""

    path: str
    body: dict[str, Any]
    params: dict[str, str] = field(default_factory=dict)


class Codec(Protocol):
    """Wire format of one provider family. ``provider`` keys ``provider_fields`` and ids."""

    provider: str

    def auth_headers(self, api_key: str | None) -> dict[str, str]: ...

    def build(self, model_id: str, request: ModelRequest) -> HttpCall: ...

    def decode(
        self, events: AsyncIterator[SSEEvent], assembler: ResponseAssembler
    ) -> AsyncGenerator[StreamEvent, None]:
        """Yield deltas made with ``assembler`` and finish with ``assembler.finish(...)``;
        raise :class:`ModelError` for error events or a stream that stops early."""
        ...


@dataclass
class Endpoint:
    """One configured provider: its pooled HTTP client and the limits all its models share."""

    provider: str
    client: httpx.AsyncClient
    limits: CallLimits
    retry: RetryPolicy

    async def aclose(self) -> None:
        await self.client.aclose()


def server_message(body: bytes) -> str:
    """The human-readable part of an error body; all three APIs use ``error.message``."""
    text = body.decode("utf-8", errors="replace")
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        return text[:500] or "(empty body)"
    error = data.get("error") if isinstance(data, dict) else None
    if isinstance(error, dict) and error.get("message"):
        return str(error["message"])
    return text[:500]


_chunk_decoder = msgspec.json.Decoder()


def decode_json(data: str, provider: str) -> Any:
    """A stream chunk's JSON (msgspec: ~3x faster than ``json`` on these small objects);
    garbage on the wire is a retryable server fault."""
    try:
        return _chunk_decoder.decode(data)
    except msgspec.DecodeError as exc:
        raise ModelError(
            f"{provider}: malformed stream chunk: {data[:200]!r}", retryable=True
        ) from exc


class _RetryLater(Exception):
    """Internal signal from one attempt to the retry loop: nothing was delivered yet."""

    def __init__(self, error: ModelError, reason: str, retry_after: float | None) -> None:
        super().__init__(str(error))
        self.error = error
        self.reason = reason
        self.retry_after = retry_after


class HttpModel(StreamingModel):
    """A remote model: ``name`` is the full model string, ``model_id`` what the API calls it."""

    def __init__(self, name: str, model_id: str, endpoint: Endpoint, codec: Codec) -> None:
        self.name = name
        self.model_id = model_id
        self.endpoint = endpoint
        self._codec = codec

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        call = self._codec.build(self.model_id, request)
        prompt_tokens = estimate_prompt_tokens(request)
        policy = self.endpoint.retry
        attempt = 0
        while True:
            try:
                async with aclosing(self._attempt(call, request, prompt_tokens)) as events:
                    async for event in events:
                        yield event
                return
            except _RetryLater as later:
                attempt += 1
                if attempt > policy.max_retries:
                    raise later.error from None
                if later.retry_after is not None and later.retry_after > policy.max_retry_after_s:
                    raise ModelError(
                        f"{later.error} (Retry-After {later.retry_after:.3g} s is past the "
                        f"{policy.max_retry_after_s:.3g} s limit)",
                        status=later.error.status,
                        retryable=True,
                        outage=later.error.outage,
                    ) from None
                delay = policy.delay(attempt, later.retry_after)
                outage = outage_reason(later.error)
                yield RetryNotice(
                    attempt=attempt,
                    delay_s=delay,
                    reason=f"{later.reason}, retrying in {delay:.3g} s",
                    outage=None if outage == "rate_limited" else outage,
                )
                await policy.sleep(delay)

    async def _attempt(
        self, call: HttpCall, request: ModelRequest, prompt_tokens: int
    ) -> AsyncGenerator[StreamEvent, None]:
        endpoint = self.endpoint
        delivered = False
        try:
            async with (
                endpoint.limits.slot(prompt_tokens),
                endpoint.client.stream(
                    "POST", call.path, json=call.body, params=call.params
                ) as response,
            ):
                if response.status_code >= 400:
                    await response.aread()
                    raise self._status_error(response)
                lines = iter_sse(response.aiter_lines())
                assembler = ResponseAssembler(request, self.name)
                async with aclosing(lines), aclosing(self._codec.decode(lines, assembler)) as out:
                    async for event in out:
                        if isinstance(event, StreamEnd):
                            endpoint.limits.rate.record(event.response.usage.completion_tokens)
                        delivered = delivered or isinstance(event, TextDelta | ToolCallDelta)
                        yield event
                    # Codecs stop at their end marker ([DONE], message_stop); the body's end
                    # follows at once. Reading it lets the pool reuse the connection instead
                    # of dropping it (a new TCP + TLS handshake on every call otherwise).
                    async for _ in lines:
                        pass
        except httpx.HTTPError as exc:
            timeout = isinstance(exc, httpx.TimeoutException)
            reason = "timeout" if timeout else "connection error"
            error = ModelError(
                f"{self.name}: {reason}: {type(exc).__name__}: {exc}",
                retryable=True,
                outage="timeout" if timeout else "connect",
            )
            raise self._after_failure(error, delivered, reason) from exc
        except ModelError as exc:
            failure = self._after_failure(exc, delivered, str(exc))
            if failure is exc:
                raise
            raise failure from exc

    def _status_error(self, response: httpx.Response) -> Exception:
        status = response.status_code
        message = server_message(response.content)
        outage = outage_of_status(status, message)
        error = ModelError(
            f"{self.name}: HTTP {status}: {message}",
            status=status,
            retryable=is_retryable_status(status) and outage != "quota",
            outage=outage,
        )
        if error.retryable:
            return _RetryLater(error, describe_status(status), parse_retry_after(response.headers))
        return error

    def _after_failure(self, error: ModelError, delivered: bool, reason: str) -> Exception:
        if delivered:
            return ModelError(
                f"{error} (after streamed output was delivered; not retried)",
                status=error.status,
                retryable=error.retryable,
                partial_output=True,
                outage=error.outage,
            )
        if error.retryable:
            return _RetryLater(error, reason, None)
        return error
