"""What every service ``main`` shares: config, logging, connection, signals, clean shutdown.

A service is an ``async def run(ctx)`` that works until ``ctx.shutdown`` is set; background
tasks it starts belong to ``ctx.tasks`` and are cancelled on the way out.
"""

from __future__ import annotations

import asyncio
import logging
import signal
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any

from longhaul.core import event_loop
from longhaul.core.connection import Connection, connect
from longhaul.core.logs import configure_logging
from longhaul.core.provision import ProvisionSettings
from longhaul.core.store import EventStore
from longhaul.core.telemetry import tracing
from longhaul.domain.config import CONFIG_ERROR_EXIT, ConfigError, LonghaulConfig, load_config

log = logging.getLogger(__name__)


@dataclass
class ServiceContext:
    name: str
    config: LonghaulConfig
    conn: Connection
    store: EventStore
    shutdown: asyncio.Event = field(default_factory=asyncio.Event)
    tasks: set[asyncio.Task[Any]] = field(default_factory=set)

    def spawn(
        self, coro: Coroutine[Any, Any, Any], *, name: str | None = None
    ) -> asyncio.Task[Any]:
        """Start a background task owned by the service (cancelled at shutdown)."""
        task = asyncio.create_task(coro, name=name)
        self.tasks.add(task)
        task.add_done_callback(self._task_done)
        return task

    def _task_done(self, task: asyncio.Task[Any]) -> None:
        self.tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("background task %s crashed", task.get_name(), exc_info=task.exception())
            self.shutdown.set()

    async def close(self) -> None:
        for task in list(self.tasks):
            task.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)
        await self.conn.close()


def provision_settings(config: LonghaulConfig) -> ProvisionSettings:
    return ProvisionSettings(
        replicas=config.nats.replicas,
        checkpoint_ttl_s=float(config.pipeline.checkpoint.ttl_seconds),
    )


async def open_context(name: str, config: LonghaulConfig) -> ServiceContext:
    conn = await connect(
        config.nats, name=f"longhaul-{name}", provision_settings=provision_settings(config)
    )
    return ServiceContext(
        name=name,
        config=config,
        conn=conn,
        store=EventStore(conn, snapshot_every=config.store.snapshot_every),
    )


async def serve(
    name: str,
    run: Callable[[ServiceContext], Coroutine[Any, Any, None]],
    config: LonghaulConfig | None = None,
) -> None:
    """Run a service until SIGINT/SIGTERM, then shut it down cleanly."""
    config = config or load_config()
    ctx = await open_context(name, config)
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, ctx.shutdown.set)
    log.info("%s started (nats %s)", name, config.nats.url)
    runner = asyncio.create_task(run(ctx), name=f"{name}-main")
    stopper = asyncio.create_task(ctx.shutdown.wait())
    try:
        done, _ = await asyncio.wait({runner, stopper}, return_when=asyncio.FIRST_COMPLETED)
        if runner in done:
            runner.result()
    finally:
        ctx.shutdown.set()
        if not runner.done():
            try:
                await asyncio.wait_for(asyncio.shield(runner), timeout=10)
            except (TimeoutError, asyncio.CancelledError):
                runner.cancel()
        stopper.cancel()
        await ctx.close()
        log.info("%s stopped", name)


def run_main(
    name: str,
    run: Callable[[ServiceContext], Coroutine[Any, Any, None]],
    check: Callable[[LonghaulConfig], None] | None = None,
) -> None:
    """Entry point body for ``longhaul-<service>`` commands. The configuration is loaded and
    ``check``-ed before anything starts: a bad one exits with ``CONFIG_ERROR_EXIT`` and a
    message naming the key (a supervisor does not restart it). Spans are exported while it
    runs when the ``OTEL_*`` variables ask for it (``longhaul.core.telemetry``)."""
    configure_logging(name)
    try:
        config = load_config()
        if check is not None:
            check(config)
    except ConfigError as exc:
        log.error("%s: invalid configuration: %s", name, exc)
        raise SystemExit(CONFIG_ERROR_EXIT) from None
    try:
        with tracing(name):
            event_loop.run(serve(name, run, config))
    except KeyboardInterrupt:
        pass
