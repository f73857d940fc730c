"""The notifier: a durable JetStream consumer over the events notices are made from, which
delivers each notice to every webhook that wants it, at least once.

The log is the queue. A delivered event is handled as any wake-up (§4): its notices are
made again from the log, and for each webhook the delivery's record in ``lh_notifications``
says what is left to do — nothing once delivered or given up; otherwise one attempt, after
which the record is written and the event is handed back to JetStream (a nak with the backoff
as its delay) until every delivery it made has an outcome. So a gateway that stops or dies
between the event and the delivery leaves the event unacknowledged, and the next gateway to
consume picks it up where the record says. Delivery ids are stable, so the receiver dedupes
the repeats a crash between a 2xx and the record's write can cause.

Webhooks are called from the gateway's event loop in their own consumer: a slow or dead one
holds at most its handling's slot (``CONCURRENCY``), never an executor's turn or a request.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import KW_ONLY, dataclass, field

import httpx
from longhaul.core.connection import Connection
from longhaul.core.consumer import ConsumerSpec, Delivery, consume
from longhaul.core.notification_records import NotificationRecords
from longhaul.domain.names import Names
from longhaul.domain.notify import DeliveryRecord, Notice, WebhookConfig, delivery_id
from longhaul.gateway.metrics import GatewayMetrics
from longhaul.gateway.notify import sender
from longhaul.gateway.notify.bodies import render
from longhaul.gateway.notify.notices import NoticeSource, subjects
from longhaul.gateway.notify.redact import UrlRedactor

log = logging.getLogger(__name__)

DURABLE = "gateway-notify"
CONCURRENCY = 16
MAX_DELIVER = 200
"""JetStream's bound on handlings of one event: far above any webhook's ``max_attempts``
(each handling makes at most one attempt per webhook), so only a handler that keeps raising
ever reaches it."""
EARLY_S = 0.05


@dataclass(eq=False)
class Notifier:
    hooks: list[WebhookConfig]
    source: NoticeSource
    records: NotificationRecords
    metrics: GatewayMetrics
    _: KW_ONLY
    clock: Callable[[], float] = time.time
    client: httpx.AsyncClient | None = field(default=None, init=False)
    redactor: UrlRedactor = field(init=False)

    def __post_init__(self) -> None:
        self.redactor = UrlRedactor(self.hooks)

    def spec(self, names: Names) -> ConsumerSpec:
        kinds = {kind for hook in self.hooks for kind in hook.events}
        return ConsumerSpec(
            durable=DURABLE,
            subjects=subjects(names, kinds),
            concurrency=CONCURRENCY,
            max_deliver=MAX_DELIVER,
            grace_s=2.0,
            from_now=True,
            description="notifications: webhooks told of runs ending, waiting, nearing a budget",
        )

    async def run(self, conn: Connection, shutdown: asyncio.Event) -> None:
        """Deliver until ``shutdown``; deliveries in flight then get ``grace_s`` to end,
        the rest are handed back to JetStream."""
        with self.redactor.installed():
            async with httpx.AsyncClient(follow_redirects=False) as client:
                self.client = client
                await consume(conn, self.spec(conn.names), self.handle, shutdown)

    async def handle(self, delivery: Delivery) -> float | None:
        """Make the event's notices and advance each of their deliveries by one attempt;
        the shortest wait left (a nak delay), or ``None`` when all of them have an outcome."""
        notices = await self.source.of(delivery)
        advanced = await asyncio.gather(  # side by side: a slow webhook delays no other
            *(
                self._advance(notice, hook, delivery.stream_seq)
                for notice in notices
                for hook in self.hooks
                if hook.wants(notice)
            )
        )
        waits = [wait for wait in advanced if wait is not None]
        return min(waits) if waits else None

    async def _advance(self, notice: Notice, hook: WebhookConfig, seq: int) -> float | None:
        ident = delivery_id(notice, hook.name)
        record, revision = await self.records.get(ident)
        now = self.clock()
        if record is None:
            if notice.budget is not None and notice.budget.ratio < hook.budget_ratio:
                return None  # not this webhook's line yet: a later event makes it again
            record = DeliveryRecord(
                delivery_id=ident,
                webhook=hook.name,
                kind=notice.kind,
                aggregate=notice.aggregate,
                aggregate_id=notice.aggregate_id,
                source_seq=seq,
                body=render(notice, hook.format, ident).decode(),
                created_at=now,
            )
        elif record.status != "pending" or record.source_seq != seq:
            return None
        elif record.next_attempt_at is not None and record.next_attempt_at > now + EARLY_S:
            return record.next_attempt_at - now  # handed back early (a restart): not yet
        assert self.client is not None
        result = await sender.attempt(
            self.client, hook, ident, notice.kind, record.body.encode(), clock=self.clock
        )
        done = self.clock()
        record.attempts += 1
        record.last_attempt_at = now
        record.last_status_code = result.status_code
        record.last_error = self.redactor.scrub(result.error) if result.error else None
        record.next_attempt_at = None
        wait: float | None = None
        if result.delivered:
            record.status, record.delivered_at, outcome = "delivered", done, "delivered"
        elif result.retry and record.attempts < hook.max_attempts:
            wait = sender.backoff_s(hook, record.attempts, result.retry_after_s)
            record.next_attempt_at, outcome = done + wait, "retried"
        else:
            record.status, outcome = "failed", "failed"
        self.metrics.notifications.labels(hook.name, notice.kind, outcome).inc()
        if outcome != "delivered":
            log.warning(
                "notification %s to %s: attempt %d %s: %s",
                ident,
                hook.name,
                record.attempts,
                "will be retried" if wait is not None else "given up",
                record.last_error,
            )
        await self.records.put(record, revision)
        return wait
