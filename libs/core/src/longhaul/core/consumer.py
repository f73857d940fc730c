"""Durable pull consumers shared by the replicas of a service (competing consumers): the one
consumer loop every service runs (:func:`consume`).

A delivery is only a wake-up (docs/07-the-log.md): handlers re-read the aggregate and
decide from state, so they are idempotent. The loop therefore acks after the handler returns
(or naks with the delay it returns: "ask me again then"), asks its :class:`ConsumerHooks` what
to answer when it raises (by default a nak with backoff, redelivery being harmless, and a term
after ``max_deliver``), and terms messages that can never be handled (a subject that is not an
event subject). While a handler runs, its message is kept alive with ``in_progress`` so a long
model call or turn is not redelivered to another replica midway; one cancelled by shutdown is
handed back at once. Work runs in :class:`Slots`, which a service may share with work of its
own (the executor's sweeper) and which shutdown drains. Deliveries with the same key (by
default the aggregate id) are handled one at a time in a replica, which keeps
optimistic-concurrency retries rare. Each handling may be a consumer span continuing the trace
context the message's headers carry (``longhaul.core.telemetry``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Coroutine
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, Final

import nats.errors
from longhaul.core.connection import Connection
from longhaul.core.keylocks import KeyLocks
from longhaul.core.read_floor import reading_after
from longhaul.core.telemetry import context_of, tracer
from longhaul.core.transient import BrokerUnavailable, retry_transient
from longhaul.domain.imports import is_imported
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

    @property
    def redelivered(self) -> bool:
        return self.num_delivered > 1


Handler = Callable[[Delivery], Awaitable[float | None]]
"""Handles one delivery: ``None`` acks it; a number of seconds naks it with that delay (not a
failure: the handler wants to look again then)."""
BUSY_FETCH_S = 0.05
TERM: Final = "term"
"""What :meth:`ConsumerHooks.failed` answers for a message never to be delivered again."""


@dataclass(frozen=True)
class ConsumerSpec:
    durable: str
    subjects: list[str]
    ack_wait_s: float = 3.0
    max_deliver: int = 20
    """Deliveries before the default failure policy gives up (-1: never)."""
    concurrency: int = 8
    retry_delay_s: float = 1.0
    fetch_timeout_s: float = 1.0
    max_ack_pending: int | None = None
    description: str | None = None
    grace_s: float | None = None
    """On shutdown, how long handlers in flight may finish before they are cancelled (and
    their messages handed back); ``None``: as long as they take."""
    from_now: bool = False
    """A new durable starts at the end of the stream instead of its beginning (the notifier:
    configuring a webhook must not announce every run that ever ended)."""


class ConsumerHooks:
    """What a service changes about the one loop; the defaults suit a stateless handler."""

    spans: bool = True
    """Each handling is a consumer span (the executor's turns have spans of their own)."""

    def key(self, delivery: Delivery) -> str | None:
        """Deliveries with the same key are handled one at a time (``None``: no lock)."""
        return delivery.aggregate_id

    async def failed(self, spec: ConsumerSpec, delivery: Delivery, exc: Exception) -> float | str:
        """The answer to a handler that raised: a nak delay in seconds, or :data:`TERM`."""
        if isinstance(exc, BrokerUnavailable):  # the broker's trouble: never a step to giving up
            log.warning("%s; handing %s back", exc, delivery.aggregate_id)
            return 30.0
        final = 0 < spec.max_deliver <= delivery.num_delivered
        log.error(
            "%s handler failed on %s %s (delivery %d%s)",
            spec.durable,
            delivery.event_type,
            delivery.aggregate_id,
            delivery.num_delivered,
            ", giving up" if final else "",
            exc_info=exc,
        )
        return TERM if final else min(30.0, spec.retry_delay_s * 2 ** (delivery.num_delivered - 1))


DEFAULT_HOOKS = ConsumerHooks()


class Slots:
    """A replica's concurrent work: the consumer loop and whatever else the service runs
    beside it (the executor's sweeper) take from one budget, and shutdown drains it."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._work: set[asyncio.Task[Any]] = set()
        self._freed = asyncio.Event()

    @property
    def free(self) -> int:
        return max(0, self.size - len(self._work))

    def start(self, coro: Coroutine[Any, Any, Any], *, name: str) -> asyncio.Task[Any]:
        """Run ``coro`` in a slot (a message already fetched may overrun the budget by what
        other work took meanwhile: it is never dropped)."""
        task = asyncio.create_task(coro, name=name)
        self._work.add(task)
        task.add_done_callback(self._finished)
        return task

    def try_start(self, coro: Coroutine[Any, Any, Any], *, name: str) -> bool:
        """Run ``coro`` if a slot is free; False (and ``coro`` closed) otherwise."""
        if self.free == 0:
            coro.close()
            return False
        self.start(coro, name=name)
        return True

    def _finished(self, task: asyncio.Task[Any]) -> None:
        self._work.discard(task)
        self._freed.set()
        if not task.cancelled() and task.exception() is not None:
            log.error("task %s crashed", task.get_name(), exc_info=task.exception())

    async def wait_free(self, shutdown: asyncio.Event) -> None:
        """Until a slot is free or ``shutdown`` is set."""
        while self.free == 0 and not shutdown.is_set():
            self._freed.clear()
            stop = asyncio.ensure_future(shutdown.wait())
            freed = asyncio.ensure_future(self._freed.wait())
            try:
                await asyncio.wait({stop, freed}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                stop.cancel()
                freed.cancel()

    async def drain(self, grace_s: float | None) -> None:
        """Let the work in flight finish (for at most ``grace_s``), then cancel the rest."""
        if self._work:
            await asyncio.wait(set(self._work), timeout=grace_s)
        for task in list(self._work):
            task.cancel()
        await asyncio.gather(*self._work, return_exceptions=True)


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
        description=spec.description,
        filter_subjects=list(spec.subjects),
        ack_policy=api.AckPolicy.EXPLICIT,
        deliver_policy=api.DeliverPolicy.NEW if spec.from_now else api.DeliverPolicy.ALL,
        ack_wait=spec.ack_wait_s,
        max_deliver=spec.max_deliver,
        max_ack_pending=spec.max_ack_pending,
    )
    try:
        await conn.js.add_consumer(conn.names.stream, config)
    except BadRequestError as exc:
        log.warning("consumer %s kept its settings: %s", spec.durable, exc.description)


async def consume(
    conn: Connection,
    spec: ConsumerSpec,
    handler: Handler,
    shutdown: asyncio.Event,
    *,
    hooks: ConsumerHooks = DEFAULT_HOOKS,
    slots: Slots | None = None,
) -> None:
    """Fetch and handle deliveries until ``shutdown`` is set, then drain the work in flight
    (``spec.grace_s``)."""
    await ensure_consumer(conn, spec)
    sub = await conn.js.pull_subscribe_bind(
        durable=spec.durable,
        stream=conn.names.stream,
        pending_msgs_limit=-1,
        pending_bytes_limit=-1,
    )
    slots = slots or Slots(spec.concurrency)
    fetcher = Fetcher(sub, idle_timeout_s=spec.fetch_timeout_s)
    locks = KeyLocks()
    try:
        while not shutdown.is_set():
            if slots.free == 0:
                await slots.wait_free(shutdown)
                continue
            try:
                messages = await _unless_stopped(fetcher.next(limit=slots.free), shutdown)
            except (TimeoutError, nats.errors.TimeoutError):
                continue
            except nats.errors.Error as exc:
                # A reconnect in progress or a server hiccup: the client reconnects by itself.
                log.warning("%s: fetch failed, retrying: %s", spec.durable, exc)
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(shutdown.wait(), timeout=spec.retry_delay_s)
                continue
            for msg in messages:
                handling = _handle(conn, spec, hooks, msg, handler, locks)
                slots.start(handling, name=f"{spec.durable}:{msg.subject}")
    finally:
        await slots.drain(spec.grace_s)
        with contextlib.suppress(Exception):
            await sub.unsubscribe()


async def _unless_stopped(fetch: Awaitable[list[Msg]], shutdown: asyncio.Event) -> list[Msg]:
    """``fetch``'s messages, or none once ``shutdown`` is set first: an idle long-poll would
    otherwise hold every stop for up to its whole timeout. A message the server hands to the
    abandoned pull is redelivered after ``ack_wait``, as after a crash."""
    fetching = asyncio.ensure_future(fetch)
    stopping = asyncio.ensure_future(shutdown.wait())
    try:
        await asyncio.wait({fetching, stopping}, return_when=asyncio.FIRST_COMPLETED)
    except asyncio.CancelledError:
        fetching.cancel()
        raise
    finally:
        stopping.cancel()
    if fetching.done():
        return fetching.result()
    fetching.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await fetching
    return []


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
    hooks: ConsumerHooks,
    msg: Msg,
    handler: Handler,
    locks: KeyLocks,
) -> None:
    delivery = _delivery(conn, msg)
    if delivery is None:
        log.warning("terminating %s: not an event subject", msg.subject)
        await send_ack(msg.term())
        return
    if is_imported(delivery.data):  # its importer wakes what is left to run, once all is there
        await send_ack(msg.ack())
        return
    heartbeat = asyncio.create_task(keep_alive(msg, spec.ack_wait_s / 3))
    key = hooks.key(delivery)
    try:
        async with locks.hold(key) if key is not None else contextlib.nullcontext():
            with (
                _process_span(spec, msg, delivery) if hooks.spans else contextlib.nullcontext(),
                reading_after(delivery.aggregate, delivery.aggregate_id, delivery.stream_seq),
            ):
                again = await retry_transient(
                    lambda: handler(delivery),
                    what=f"{spec.durable}: {delivery.event_type} of {delivery.aggregate_id}",
                )
    except asyncio.CancelledError:
        heartbeat.cancel()
        await send_ack(msg.nak())  # shutting down: another replica takes it now
        raise
    except Exception as exc:
        heartbeat.cancel()
        answer = await hooks.failed(spec, delivery, exc)
        await send_ack(msg.term() if answer == TERM else msg.nak(delay=float(answer)))
        return
    heartbeat.cancel()
    await send_ack(msg.ack() if again is None else msg.nak(delay=again))


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
