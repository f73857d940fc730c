"""What every service ``main`` shares: config, logging, connection, signals, clean shutdown,
and its composition root.

A service is an ``async def run(ctx)`` that works until ``ctx.shutdown`` is set; background
tasks it starts belong to ``ctx.background`` and are cancelled on the way out.
:class:`ServiceContext` is the one place a service's stores are built — the event recorder,
the trace and task repositories (with their snapshots declared here), the trace index,
workspace, experiences, evals and checkpoints — each once, on first use; routers and handlers
ask the context for them and never construct their own.
"""

from __future__ import annotations

import asyncio
import logging
import signal
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from longhaul.core import event_loop, repository
from longhaul.core.checkpoints import Checkpoints
from longhaul.core.config import CONFIG_ERROR_EXIT, LonghaulConfig, load_config
from longhaul.core.connection import Connection, connect
from longhaul.core.erasure import Eraser
from longhaul.core.evals import EvalStore
from longhaul.core.experiences import ExperienceStore
from longhaul.core.index import TraceIndex
from longhaul.core.logs import configure_logging
from longhaul.core.notification_records import NotificationRecords
from longhaul.core.provision import ProvisionSettings
from longhaul.core.repository import Repository
from longhaul.core.snapshots import Snapshots, SnapshotStore
from longhaul.core.storage import StorageGauge
from longhaul.core.store import EventStore
from longhaul.core.telemetry import tracing
from longhaul.core.workspace import WorkspaceStore
from longhaul.domain.config import ConfigError
from longhaul.domain.state import ScheduleState, TaskState, TraceState

log = logging.getLogger(__name__)

TASK_FOLDS_CACHED = {"planner": 256}
# How long closing waits for cancelled background tasks before it closes the connection.
CLOSE_TIMEOUT_S = 10.0
"""Services that keep coming back to the same tasks keep their folds (the planner, at each
step of each phase) and read only the new events; the others read snapshot plus tail."""


@dataclass
class ServiceContext:
    name: str
    config: LonghaulConfig
    conn: Connection
    shutdown: asyncio.Event = field(default_factory=asyncio.Event)
    background: set[asyncio.Task[Any]] = field(default_factory=set)

    # ------------------------------------------------------------------ the stores, built once

    @cached_property
    def store(self) -> EventStore:
        """The event recorder (append, replay, watch): for folds, use the repositories."""
        return EventStore(self.conn)

    @cached_property
    def snapshots(self) -> SnapshotStore:
        return SnapshotStore(self.conn)

    @cached_property
    def traces(self) -> Repository[TraceState]:
        """Trace folds: snapshot plus catch-up, no cache (each reader holds its own fold)."""
        return repository.traces(self.store, snapshots=self.snapshots)

    @cached_property
    def tasks(self) -> Repository[TaskState]:
        """Task folds, cached where :data:`TASK_FOLDS_CACHED` says so."""
        cache_size = TASK_FOLDS_CACHED.get(self.name, 0)
        return repository.tasks(self.store, snapshots=self.snapshots, cache_size=cache_size)

    @cached_property
    def schedules(self) -> Repository[ScheduleState]:
        """Schedule folds (a schedule's failed ticks), no snapshots: their logs are short."""
        return repository.schedules(self.store)

    def followed_traces(self, cache_size: int) -> Repository[TraceState]:
        """Trace folds kept in an LRU of ``cache_size``, for a reader that comes back to the
        same traces (the gateway's notifier at each of their events, its viewer reads): it
        reads only what is new. Readers share a cached fold and never change it."""
        return repository.traces(self.store, snapshots=self.snapshots, cache_size=cache_size)

    def traces_over(self, conn: Connection) -> Repository[TraceState]:
        """Trace folds through another connection of this service (a NATS user of its own,
        as the executor's import writer has): built here like every store, no snapshots and
        no cache."""
        return repository.traces(EventStore(conn))

    def snapshotter(self) -> Snapshots:
        """A new snapshot taker for one writer, who flushes it (``store.snapshot_every``)."""
        return Snapshots(self.snapshots, self.config.store.snapshot_every)

    @cached_property
    def index(self) -> TraceIndex:
        return TraceIndex(self.conn)

    @cached_property
    def eraser(self) -> Eraser:
        """Erases a trace or task from every bucket and the stream (``DELETE`` routes)."""
        return Eraser(self.conn, self.index)

    @cached_property
    def storage(self) -> StorageGauge:
        """How full the event stream and the object store are (507s, storage_full stops)."""
        return StorageGauge(self.conn, headroom=self.config.store.headroom)

    @cached_property
    def workspace(self) -> WorkspaceStore:
        return WorkspaceStore(self.conn)

    @cached_property
    def experiences(self) -> ExperienceStore:
        return ExperienceStore(self.conn)

    @cached_property
    def evals(self) -> EvalStore:
        return EvalStore(self.conn)

    @cached_property
    def notification_records(self) -> NotificationRecords:
        """Notification deliveries, one record each (``lh_notifications``)."""
        return NotificationRecords(self.conn)

    @cached_property
    def checkpoints(self) -> Checkpoints:
        return Checkpoints(self.conn, enabled=self.config.pipeline.checkpoint.enabled)

    def spawn(
        self, coro: Coroutine[Any, Any, Any], *, name: str | None = None
    ) -> asyncio.Task[Any]:
        """Start a background task owned by the service (cancelled at shutdown)."""
        task = asyncio.create_task(coro, name=name)
        self.background.add(task)
        task.add_done_callback(self._task_done)
        return task

    def _task_done(self, task: asyncio.Task[Any]) -> None:
        self.background.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("background task %s crashed", task.get_name(), exc_info=task.exception())
            self.shutdown.set()

    async def close(self) -> None:
        """Cancel the background tasks, wait a bounded time for them, close the connection.
        A task that outlives its cancel (one that swallowed it) is named, not waited for;
        the shutdown event is set first, so that a loop whose cancel a library turned into an
        ordinary error (nats-py does, on a closing connection) still ends at its next look."""
        self.shutdown.set()
        tasks = list(self.background)
        for task in tasks:
            task.cancel()
        if tasks:
            _, stuck = await asyncio.wait(tasks, timeout=CLOSE_TIMEOUT_S)
            for task in stuck:
                log.error("background task %s did not stop when cancelled", task.get_name())
        await self.conn.close()


def provision_settings(config: LonghaulConfig) -> ProvisionSettings:
    return ProvisionSettings(
        replicas=config.nats.replicas,
        checkpoint_ttl_s=float(config.pipeline.checkpoint.ttl_seconds),
        max_bytes=config.store.max_bytes,
        object_max_bytes=config.store.object_max_bytes,
    )


async def open_context(name: str, config: LonghaulConfig) -> ServiceContext:
    conn = await connect(
        config.nats, name=f"longhaul-{name}", provision_settings=provision_settings(config)
    )
    return ServiceContext(name=name, config=config, conn=conn)


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
