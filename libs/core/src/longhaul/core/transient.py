"""Broker trouble is not poison.

While a JetStream stream elects a leader, a node restarts or the client reconnects, requests
time out, find no responders or get "no response from stream". Such an error says nothing
about the event being handled: the handler is retried in place (the message kept in progress)
with backoff until the broker answers, and only when it stays down past ``TRANSIENT_RETRY_S``
is the delivery given up — still without being counted as a poison attempt by the caller.
Errors that come from the event itself (it cannot be decided, a bug) stay poison candidates.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

import nats.errors
import nats.js.errors
from longhaul.core.read_floor import StaleRead

log = logging.getLogger(__name__)

T = TypeVar("T")

TRANSIENT_RETRY_S = 120.0
BACKOFF_MIN_S = 0.1
BACKOFF_MAX_S = 5.0

_TRANSIENT: tuple[type[BaseException], ...] = (
    TimeoutError,
    ConnectionError,
    nats.errors.TimeoutError,
    nats.errors.NoRespondersError,
    nats.errors.ConnectionClosedError,
    nats.errors.ConnectionReconnectingError,
    nats.errors.StaleConnectionError,
    nats.errors.OutboundBufferLimitError,
    nats.errors.FlushTimeoutError,
    nats.errors.NoServersError,
    nats.js.errors.NoStreamResponseError,
    nats.js.errors.ServiceUnavailableError,
    nats.js.errors.FetchTimeoutError,
    StaleRead,
)

# JetStream API errors that mean "not now" (no quorum, no leader yet), not "never": JS
# temporarily unavailable; cluster not active; no suitable peers for placement (a replicated
# stream asked for while a cluster is still forming or a node restarts — a cluster too small
# for the replicas still fails, once the retry window is spent).
_TRANSIENT_API_CODES = frozenset({10005, 10008, 10076})


STORAGE_FULL_CODES = frozenset({10023, 10047, 10077})
"""JetStream's "insufficient resources", "insufficient storage resources available" and
"stream store failed" (its ``maximum bytes exceeded``): the store refused to grow. They come
as 503s, but waiting never makes room (``longhaul.core.storage``)."""


def is_storage_full(exc: BaseException | None) -> bool:
    """A write refused because a stream or the server's disk is at its limit, or an error it
    caused (the effect ledger's ``EffectNotRecorded`` wraps the refused append)."""
    for _ in range(8):
        if exc is None:
            return False
        if isinstance(exc, nats.js.errors.APIError) and exc.err_code in STORAGE_FULL_CODES:
            return True
        exc = exc.__cause__
    return False


def is_transient(exc: BaseException) -> bool:
    if is_storage_full(exc):
        return False
    if isinstance(exc, _TRANSIENT):
        return True
    if isinstance(exc, nats.js.errors.APIError):
        return exc.code == 503 or exc.err_code in _TRANSIENT_API_CODES
    return False


class BrokerUnavailable(Exception):
    """The broker stayed unreachable for the whole retry window."""


async def retry_transient(
    work: Callable[[], Awaitable[T]], *, what: str, within_s: float = TRANSIENT_RETRY_S
) -> T:
    """Run ``work``; on a transient broker error run it again after a jittered backoff, until
    ``within_s`` has passed (then :class:`BrokerUnavailable`). Other errors propagate."""
    deadline = time.monotonic() + within_s
    delay = BACKOFF_MIN_S
    while True:
        try:
            return await work()
        except Exception as exc:
            if not is_transient(exc):
                raise
            if time.monotonic() + delay > deadline:
                raise BrokerUnavailable(f"{what}: broker unavailable: {exc!r}") from exc
            log.warning("%s: transient broker error, retrying in %.2fs: %r", what, delay, exc)
            await asyncio.sleep(delay * (0.5 + random.random() / 2))
            delay = min(BACKOFF_MAX_S, delay * 2)
