"""Durable pull consumers shared by the replicas of a service (competing consumers).

A delivery is only a wake-up (docs/ARCHITECTURE.md §4): handlers re-read the aggregate and
decide from state, so they are idempotent. The loop therefore acks after the handler returns,
naks with a delay when it raises (redelivery is harmless), and terms messages that can never be
handled (a subject that is not an event subject). While a handler runs, its message is kept
alive with ``in_progress`` so a long model call or command is not redelivered to another replica
midway. Deliveries with the same key (by default the aggregate id) are handled one at a time in
a replica, which keeps optimistic-concurrency retries rare. Each handling is a consumer span
continuing the trace context the message's headers carry (``longhaul.core.telemetry``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field

import nats.errors
from longhaul.core.connection import Connection
from longhaul.core.telemetry import context_of, tracer
from longhaul.core.transient import BrokerUnavailable, retry_transient
from nats.aio.msg import Msg
from nats.js import JetStreamContext, api
from nats.js.errors import BadRequestError
from opentelemetry.context import Context
from opentelemetry.trace import Span, SpanKind

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Delivery:
    """One event delivered to a service: where it belongs and how often it came."""

    aggregate: str
    aggregate_id: str
    event_type: str
    stream_seq: int
    num_delivered: int
    data: bytes


Handler = Callable[[Delivery], Awaitable[None]]
BUSY_FETCH_S = 0.05


@dataclass(frozen=True)
class ConsumerSpec:
    durable: str
    subjects: list[str]
    ack_wait_s: float = 3.0
    max_deliver: int = 20
    concurrency: int = 8
    retry_delay_s: float = 1.0
    fetch_timeout_s: float = 1.0


@dataclass
class KeyLocks:
    """One lock per key, dropped when nobody holds or waits for it."""

    locks: dict[str, asyncio.Lock] = field(default_factory=dict)
    users: dict[str, int] = field(default_factory=dict)

    @contextlib.asynccontextmanager
    async def hold(self, key: str) -> AsyncIterator[None]:
        lock = self.locks.setdefault(key, asyncio.Lock())
        self.users[key] = self.users.get(key, 0) + 1
        try:
            async with lock:
                yield
        finally:
            self.users[key] -= 1
            if not self.users[key]:
                del self.users[key]
                del self.locks[key]


class Fetcher:
    """Pulls deliveries with low latency when idle and in batches when busy.

    nats-py's ``fetch(n > 1)`` hands over the first message of a lull only when the batch
    fills or the pull request expires, so a lone wake-up would wait up to the whole timeout.
    While idle we therefore long-poll for one message; once messages flow, a batched pull
    (whose no-wait probe returns what is there at once) takes the backlog in one round trip.
    """

    def __init__(
        self, sub: JetStreamContext.PullSubscription, *, idle_timeout_s: float, batch: int = 32
    ) -> None:
        self.sub = sub
        self.idle_timeout_s = idle_timeout_s
        self.batch = batch
        self._busy = False

    async def next(self, *, limit: int) -> list[Msg]:
        """Up to ``limit`` messages; raises a timeout error when none came while idle."""
        if self._busy and limit > 1:
            try:
                messages = await self.sub.fetch(min(limit, self.batch), timeout=BUSY_FETCH_S)
            except (TimeoutError, nats.errors.TimeoutError):
                messages = []
        else:
            messages = await self.sub.fetch(1, timeout=self.idle_timeout_s)
        self._busy = bool(messages)
        return messages


async def ensure_consumer(conn: Connection, spec: ConsumerSpec) -> None:
    """Create the durable, or update it when it exists with other settings."""
    config = api.ConsumerConfig(
        name=spec.durable,
        durable_name=spec.durable,
        filter_subjects=list(spec.subjects),
        ack_policy=api.AckPolicy.EXPLICIT,
        deliver_policy=api.DeliverPolicy.ALL,
        ack_wait=spec.ack_wait_s,
        max_deliver=spec.max_deliver,
    )
    try:
        await conn.js.add_consumer(conn.names.stream, config)
    except BadRequestError as exc:
        log.warning("consumer %s kept its settings: %s", spec.durable, exc.description)


async def run_consumer(
    conn: Connection,
    spec: ConsumerSpec,
    handler: Handler,
    shutdown: asyncio.Event,
    *,
    key: Callable[[Delivery], str] = lambda delivery: delivery.aggregate_id,
) -> None:
    """Fetch and handle deliveries until ``shutdown`` is set; handlers in flight finish."""
    await ensure_consumer(conn, spec)
    sub = await conn.js.pull_subscribe_bind(durable=spec.durable, stream=conn.names.stream)
    slots = asyncio.Semaphore(spec.concurrency)
    fetcher = Fetcher(sub, idle_timeout_s=spec.fetch_timeout_s)
    locks = KeyLocks()
    running: set[asyncio.Task[None]] = set()
    try:
        while not shutdown.is_set():
            await slots.acquire()
            slots.release()
            try:
                messages = await fetcher.next(limit=spec.concurrency)
            except (TimeoutError, nats.errors.TimeoutError):
                continue
            except nats.errors.Error as exc:
                # A reconnect in progress or a server hiccup: the client reconnects by itself.
                log.warning("%s: fetch failed, retrying: %s", spec.durable, exc)
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(shutdown.wait(), timeout=spec.retry_delay_s)
                continue
            for msg in messages:
                await slots.acquire()
                task = asyncio.create_task(_handle(conn, spec, msg, handler, locks, key))
                running.add(task)
                task.add_done_callback(running.discard)
                task.add_done_callback(lambda _t: slots.release())
    finally:
        if running:
            await asyncio.gather(*running, return_exceptions=True)
        with contextlib.suppress(Exception):
            await sub.unsubscribe()


def _delivery(conn: Connection, msg: Msg) -> Delivery | None:
    try:
        aggregate, aggregate_id, event_type = conn.names.parse_subject(msg.subject)
    except IndexError:
        return None
    meta = msg.metadata
    return Delivery(
        aggregate=aggregate,
        aggregate_id=aggregate_id,
        event_type=event_type,
        stream_seq=meta.sequence.stream,
        num_delivered=meta.num_delivered,
        data=msg.data,
    )


async def _handle(
    conn: Connection,
    spec: ConsumerSpec,
    msg: Msg,
    handler: Handler,
    locks: KeyLocks,
    key: Callable[[Delivery], str],
) -> None:
    delivery = _delivery(conn, msg)
    if delivery is None:
        log.warning("terminating %s: not an event subject", msg.subject)
        await send_ack(msg.term())
        return
    heartbeat = asyncio.create_task(keep_alive(msg, spec.ack_wait_s / 3))
    try:
        async with locks.hold(key(delivery)):
            with _process_span(spec, msg, delivery):
                await retry_transient(
                    lambda: handler(delivery),
                    what=f"{spec.durable}: {delivery.event_type} of {delivery.aggregate_id}",
                )
    except asyncio.CancelledError:
        heartbeat.cancel()
        raise
    except BrokerUnavailable as exc:  # the broker's trouble: never a step toward giving up
        heartbeat.cancel()
        log.warning("%s; handing %s back", exc, delivery.aggregate_id)
        await send_ack(msg.nak(delay=30.0))
        return
    except Exception:
        heartbeat.cancel()
        final = delivery.num_delivered >= spec.max_deliver
        log.exception(
            "%s handler failed on %s %s (delivery %d%s)",
            spec.durable,
            delivery.event_type,
            delivery.aggregate_id,
            delivery.num_delivered,
            ", giving up" if final else "",
        )
        delay = min(30.0, spec.retry_delay_s * 2 ** (delivery.num_delivered - 1))
        await send_ack(msg.term() if final else msg.nak(delay=delay))
        return
    heartbeat.cancel()
    await send_ack(msg.ack())


def _process_span(spec: ConsumerSpec, msg: Msg, delivery: Delivery) -> AbstractContextManager[Span]:
    """A consumer span for one handling, continuing the trace context in the message's
    headers (the writer's span), so what the handler appends continues it too."""
    return tracer().start_as_current_span(
        f"process {delivery.event_type}",
        context=context_of(msg.headers) or Context(),
        kind=SpanKind.CONSUMER,
        attributes={
            "messaging.system": "nats",
            "messaging.operation.type": "process",
            "messaging.destination.name": msg.subject,
            "messaging.consumer.group.name": spec.durable,
            "messaging.message.delivery_count": delivery.num_delivered,
            "longhaul.event.type": delivery.event_type,
            f"longhaul.{delivery.aggregate}.id": delivery.aggregate_id,
        },
    )


async def keep_alive(msg: Msg, every_s: float) -> None:
    """Tell the server every ``every_s`` that ``msg`` is still being handled (until
    cancelled), so a long handling is not redelivered to another replica."""
    while True:
        await asyncio.sleep(every_s)
        await send_ack(msg.in_progress())


async def send_ack(ack: Awaitable[None]) -> None:
    """Ack/nak/term are fire-and-forget publishes; a lost one only means a redelivery."""
    try:
        await ack
    except (nats.errors.Error, OSError) as exc:
        log.warning("could not send a message's acknowledgement: %s", exc)
