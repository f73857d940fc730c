"""A fix for nats-py's ``publish_async``: an error acknowledgement must fail its future.

nats-py's reply handler calls ``APIError.from_error``, which raises instead of returning, so
the error escapes into the subscription task (logged as a connection error) and the future
returned by ``publish_async`` never resolves: a write-behind append that lost a race would
wait for its timeout instead of re-deciding at once (nats-io/nats.py#985; the fix proposed
upstream in #994 is this one). Remove once a release carries it.
"""

from __future__ import annotations

import asyncio
import json

import nats.js.errors
from nats.aio.msg import Msg
from nats.js import api
from nats.js.client import NO_RESPONDERS_STATUS, JetStreamContext


async def handle_async_reply(self: JetStreamContext, msg: Msg) -> None:
    token = msg.subject[len(self._nc._inbox_prefix) + 22 + 2 :]
    future = self._publish_async_futures.get(token)
    if future is None or future.done():
        return
    if msg.headers and msg.headers.get(api.Header.STATUS) == NO_RESPONDERS_STATUS:
        future.set_exception(nats.js.errors.NoStreamResponseError)
        return
    try:
        resp = json.loads(msg.data)
        if "error" in resp:
            nats.js.errors.APIError.from_error(resp["error"])  # raises the matching error
        future.set_result(api.PubAck.from_response(resp))
    except (asyncio.CancelledError, asyncio.InvalidStateError):
        pass
    except Exception as exc:  # the server's error, or an answer that is not an ack
        future.set_exception(exc)


def install() -> None:
    """Replace nats-py's handler (idempotent)."""
    JetStreamContext._handle_async_reply = handle_async_reply  # type: ignore[method-assign]
