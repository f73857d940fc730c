"""The gateway's background loops, started and stopped in one place.

Besides answering requests every gateway runs: the trace index mirror (what listings and the
inbox read), retention (erases what outlived its age), the notifier (webhooks), key
revocation, the schedule ticker, and a subscription counting the executors' model-call
retries for ``/metrics``. Each is a task owned by the service context, so shutdown cancels it.
"""

from __future__ import annotations

import contextlib

from longhaul.core.service import ServiceContext
from longhaul.gateway.notify.wiring import build_notifier
from longhaul.gateway.retention import Retention
from longhaul.gateway.revocation import Revocation
from longhaul.gateway.runtime import Runtime
from longhaul.gateway.schedules.ticker import Ticker
from nats.aio.subscription import Subscription


class BackgroundLoops:
    """Starts every loop on a connected context; :meth:`stop` undoes what the context's own
    shutdown does not (the metrics subscription)."""

    def __init__(self, runtime: Runtime, ctx: ServiceContext) -> None:
        self.runtime = runtime
        self.ctx = ctx
        self._retries: Subscription | None = None

    async def start(self) -> None:
        runtime, ctx, config = self.runtime, self.ctx, self.runtime.config
        mirror = runtime.metrics.mirror = runtime.mirror
        retention = Retention(runtime, config.retention)
        if retention.enabled:
            mirror.observers.append(retention.observe)
            ctx.spawn(retention.run(ctx.shutdown), name="retention")
        ctx.spawn(mirror.run(ctx.shutdown), name="index-mirror")
        if config.notify:
            notifier = build_notifier(runtime, ctx)
            ctx.spawn(notifier.run(ctx.conn, ctx.shutdown), name="notifier")
        revocation = Revocation(runtime)
        ctx.spawn(revocation.run(ctx.shutdown), name="revocation")
        ticker = Ticker(runtime, runtime.schedule_store, revocation)
        ctx.spawn(ticker.run(ctx.shutdown), name="schedules")
        self._retries = await ctx.conn.nc.subscribe(
            f"{ctx.conn.names.live_root}.>", cb=runtime.metrics.on_live
        )

    async def stop(self) -> None:
        if self._retries is not None:
            with contextlib.suppress(Exception):
                await self._retries.unsubscribe()
