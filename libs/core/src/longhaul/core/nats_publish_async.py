"""A fix for nats-py's ``publish_async``: an error acknowledgement must fail its future.

nats-py's reply handler calls ``APIError.from_error``, which raises instead of returning, so
the error escapes into the subscription task (logged as a connection error) and the future
returned by ``publish_async`` never resolves: a write-behind append that lost a race would
wait for its timeout instead of re-deciding at once (nats-io/nats.py#985; the fix proposed
upstream in #994 is this one). Remove once a release carries it.

The answer is decoded with msgspec into the fields an append reads (stream, sequence,
duplicate, domain): nats-py's ``PubAck.from_response`` walks the dataclass's fields on every
acknowledgement, a measurable part of a step's CPU.
"""

from __future__ import annotations

import asyncio
from typing import Any

import msgspec
import nats.js.errors
from nats.aio.msg import Msg
from nats.js import api
from nats.js.client import NO_RESPONDERS_STATUS, JetStreamContext


class _Answer(msgspec.Struct):
    stream: str = ""
    seq: int = 0
    duplicate: bool | None = None
    domain: str | None = None
    error: dict[str, Any] | None = None


_decode = msgspec.json.Decoder(_Answer).decode


async def handle_async_reply(self: JetStreamContext, msg: Msg) -> None:
    token = msg.subject[len(self._nc._inbox_prefix) + 22 + 2 :]
    future = self._publish_async_futures.get(token)
    if future is None or future.done():
        return
    if msg.headers and msg.headers.get(api.Header.STATUS) == NO_RESPONDERS_STATUS:
        future.set_exception(nats.js.errors.NoStreamResponseError)
        return
    try:
        answer = _decode(msg.data)
        if answer.error is not None:
            nats.js.errors.APIError.from_error(answer.error)  # raises the matching error
        ack = api.PubAck(
            stream=answer.stream, seq=answer.seq, domain=answer.domain, duplicate=answer.duplicate
        )
        future.set_result(ack)
    except (asyncio.CancelledError, asyncio.InvalidStateError):
        pass
    except Exception as exc:  # the server's error, or an answer that is not an ack
        future.set_exception(exc)


def install() -> None:
    """Replace nats-py's handler (idempotent)."""
    JetStreamContext._handle_async_reply = handle_async_reply  # type: ignore[method-assign]
