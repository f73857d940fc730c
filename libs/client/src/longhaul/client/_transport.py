"""What the sync and async clients share: where the gateway is, how an answer becomes a
model or an exception, the ``text/event-stream`` decoder and the reconnection policy of a
stream. Only the sending itself (blocking or awaited) is written twice."""

from __future__ import annotations

import json
import os
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Concatenate, ParamSpec, Protocol, TypeVar

import httpx
from longhaul.client._calls import Call
from longhaul.client.errors import LonghaulError, StreamLost, Unreachable, error_from
from longhaul.client.models import Event

URL_ENV = "LONGHAUL_URL"
API_KEY_ENV = "LONGHAUL_API_KEY"
DEFAULT_URL = "http://127.0.0.1:8080"
TIMEOUT_S = 10.0
STREAM_READ_TIMEOUT_S = 60.0
"""Streams carry a heartbeat every 15 s; a minute of silence means the connection is dead."""
STREAM_ATTEMPTS = 8
"""Consecutive failed connections (no event in between) before a stream gives up."""
BACKOFF_BASE_S = 0.25
BACKOFF_MAX_S = 5.0

T = TypeVar("T")
P = ParamSpec("P")

# A dropped or refused connection: a stream reconnects after these, a plain call reports them.
CONNECT_ERRORS = (httpx.ConnectError, httpx.ConnectTimeout)
DROP_ERRORS = (httpx.ReadError, httpx.ReadTimeout, httpx.RemoteProtocolError)


@dataclass(frozen=True)
class Settings:
    base_url: str
    headers: dict[str, str]
    timeout: httpx.Timeout

    @classmethod
    def resolve(cls, base_url: str | None, api_key: str | None, timeout: float | None) -> Settings:
        """Arguments first, then ``LONGHAUL_URL`` / ``LONGHAUL_API_KEY``, then the local
        default (``longhaul up`` serves on 127.0.0.1:8080)."""
        url = (base_url or os.environ.get(URL_ENV) or DEFAULT_URL).rstrip("/")
        key = api_key if api_key is not None else os.environ.get(API_KEY_ENV)
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        return cls(url, headers, httpx.Timeout(TIMEOUT_S if timeout is None else timeout))


def request_args(call: Call[Any]) -> dict[str, Any]:
    args = {"method": call.method, "url": call.path, "params": call.params, "headers": call.headers}
    if call.markdown is not None:
        return args | {"content": call.markdown, "headers": {"Content-Type": "text/markdown"}}
    if call.files is not None:
        return args | {"files": [("files", (name, data)) for name, data in call.files.items()]}
    if call.content is not None:
        return args | {"content": call.content}
    return args | {"json": call.body}


def answer(call: Call[T], response: httpx.Response) -> T:
    if response.status_code >= 400:
        raise error_from(response)
    return call.parse(response)


def failure(url: str, exc: httpx.HTTPError) -> LonghaulError:
    """A transport error of a plain call as the client's exception."""
    if isinstance(exc, CONNECT_ERRORS):
        return Unreachable(url, exc)
    if isinstance(exc, httpx.TimeoutException):
        return LonghaulError(f"the gateway at {url} did not answer in time")
    return LonghaulError(f"request to {url} failed: {exc}")


class SseDecoder:
    """``text/event-stream`` lines to events (comments and ``retry:`` skipped)."""

    def __init__(self) -> None:
        self._fields: dict[str, str] = {}

    def feed(self, line: str) -> Event | None:
        if line:
            if not line.startswith(":"):
                name, _, value = line.partition(":")
                self._fields[name] = value.removeprefix(" ")
            return None
        fields, self._fields = self._fields, {}
        if "data" not in fields:
            return None
        event_id = fields.get("id")
        return Event(
            fields.get("event", "message"),
            json.loads(fields["data"]),
            int(event_id) if event_id else None,
        )


class Resume:
    """Where a stream stands: the last stored event seen (sent back as ``Last-Event-ID``) and
    how many connections in a row failed. Heartbeats are consumed here; an ``error`` frame
    (the gateway lost its NATS feed) ends the connection and counts as a failure."""

    def __init__(self, url: str, after: int, follow: bool, live: bool, attempts: int) -> None:
        self.url = url
        self.last = after
        self.follow = follow
        self.live = live
        self.attempts = attempts
        self.failures = 0
        self.broken = False
        self.cause: Exception | None = None

    def stream_args(self, path: str) -> dict[str, Any]:
        return {
            "method": "GET",
            "url": path,
            "params": {"follow": "true" if self.follow else "false"},
            "headers": {"Last-Event-ID": str(self.last)},
            "timeout": httpx.Timeout(TIMEOUT_S, read=STREAM_READ_TIMEOUT_S),
        }

    def opened(self, response: httpx.Response) -> None:
        """Raise a refusal no retry can fix (4xx); note a transient one (5xx)."""
        self.broken = False
        if response.status_code >= 500:
            self.broken = True
            self.cause = error_from(response)
        elif response.status_code >= 400:
            raise error_from(response)

    def take(self, event: Event | None) -> Event | None:
        """``event`` if the caller should see it (not a heartbeat, an error frame, or a
        token delta unasked for)."""
        if event is None:
            return None
        self.failures = 0
        if event.event == "error":
            self.broken = True
            self.cause = StreamLost(f"the gateway's stream failed: {event.data.get('message')}")
            return None
        if event.id is not None:
            self.last = event.id
        if event.event == "heartbeat" or (event.event == "live" and not self.live):
            return None
        return event

    def ended(self) -> bool:
        """After a connection closed: whether the stream is over. Without ``follow`` it is
        once the stored events ran out; a followed stream only closes when the gateway
        shuts down, so it reconnects (to the next gateway, or this one restarted)."""
        return not self.follow and not self.broken

    def dropped(self, exc: Exception) -> None:
        self.cause = exc

    def delay(self) -> float:
        """Seconds to wait before reconnecting; raises once the attempts are spent."""
        self.failures += 1
        if self.failures >= self.attempts:
            if isinstance(self.cause, CONNECT_ERRORS):
                raise Unreachable(self.url, self.cause)
            raise StreamLost(
                f"lost the event stream of {self.url} after {self.attempts} attempts: {self.cause}"
            )
        return min(BACKOFF_BASE_S * 2 ** (self.failures - 1), BACKOFF_MAX_S)


class SyncSender(Protocol):
    def _send(self, call: Call[T]) -> T: ...


class AsyncSender(Protocol):
    async def _send(self, call: Call[T]) -> T: ...


def bind_sync(build: Callable[P, Call[T]]) -> Callable[Concatenate[SyncSender, P], T]:
    """A client method from an endpoint builder: same signature and docstring."""

    def method(self: SyncSender, /, *args: P.args, **kwargs: P.kwargs) -> T:
        return self._send(build(*args, **kwargs))

    method.__name__ = build.__name__
    method.__doc__ = build.__doc__
    return method


def bind_async(
    build: Callable[P, Call[T]],
) -> Callable[Concatenate[AsyncSender, P], Awaitable[T]]:
    async def method(self: AsyncSender, /, *args: P.args, **kwargs: P.kwargs) -> T:
        return await self._send(build(*args, **kwargs))

    method.__name__ = build.__name__
    method.__doc__ = build.__doc__
    return method
