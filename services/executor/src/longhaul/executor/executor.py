"""The executor service: competing consumer on trace wake-ups, turns under leases, sweeper.

Wake-ups come through the one consumer loop (:func:`longhaul.core.consumer.consume`): each is
handled in its own task (at most ``concurrency`` at once per replica, a budget the sweeper's
takeovers share) and kept alive with ``in_progress`` while it runs, so a long turn is not
redelivered elsewhere. A handling that raises is retried with backoff; after
``poison_attempts`` the message is terminated and the trace failed with the reason, without
holding up other traces (:class:`WakeupHooks`). On shutdown the replica stops fetching, lets
running turns finish for a grace period, then cancels them: their leases are released and
their wake-ups handed back for another replica.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass
from pathlib import Path
from wsgiref.simple_server import WSGIServer

import msgspec
from longhaul.agent.tools.sandbox import Sandbox
from longhaul.core.connection import Connection, connect
from longhaul.core.consumer import TERM, ConsumerHooks, ConsumerSpec, Delivery, Slots, consume
from longhaul.core.index import TraceIndex
from longhaul.core.service import ServiceContext
from longhaul.core.transient import BrokerUnavailable, is_storage_full
from longhaul.domain.liveness import ProcessExited
from longhaul.executor.agent_turns import AgentTurns
from longhaul.executor.children import Children
from longhaul.executor.deadlines import WaitDeadlines
from longhaul.executor.erasure import WorkdirEraser
from longhaul.executor.imports import QUEUE as IMPORT_QUEUE
from longhaul.executor.imports import ImportWriter
from longhaul.executor.leases import STALE_TTLS, Lease, Leases
from longhaul.executor.metrics import ExecutorMetrics
from longhaul.executor.poison import record_poison
from longhaul.executor.remote import RemoteAgents, RemoteWaits
from longhaul.executor.settings import ExecutorSettings
from longhaul.executor.sweeper import Sweeper
from longhaul.executor.tools import ExecutorTools
from longhaul.executor.turn import TurnRunner, TurnRunnerSettings
from longhaul.executor.wakeups import FINAL_TYPES, SPAWN_TYPES, consumer_spec, is_wakeup
from nats.aio.msg import Msg

log = logging.getLogger(__name__)

MAX_RETRY_DELAY_S = 10.0


class Executor:
    def __init__(
        self,
        ctx: ServiceContext,
        settings: ExecutorSettings,
        agent: AgentTurns,
        tools: ExecutorTools,
        remote: RemoteAgents | None = None,
        *,
        working_root: Path | None = None,
        metrics: ExecutorMetrics | None = None,
    ) -> None:
        self.ctx = ctx
        self.workdirs = WorkdirEraser(working_root or Path.cwd())
        self.settings = settings
        self.agent = agent
        self.tools = tools
        self.traces = ctx.traces
        self.index = ctx.index
        self.metrics = metrics or ExecutorMetrics()
        self.leases = Leases(ctx.conn, settings.id, ctx.config.store.lease_ttl_s)
        actor = f"executor:{settings.id}"
        self.actor = actor
        self.remote = remote or RemoteAgents(ctx.config.remote_agents)
        self.children = Children(
            self.traces,
            max_concurrent=ctx.config.pipeline.max_concurrent_subtraces,
            max_descendants=ctx.config.pipeline.delegation.max_descendants,
            actor=actor,
            metrics=self.metrics,
            remote=self.remote,
            index=ctx.index,
        )
        self.turns = TurnRunner(
            ctx,
            self.leases,
            agent,
            self.metrics,
            TurnRunnerSettings(actor=actor, index_interval_s=settings.index_interval_s),
        )
        self.sweeper = Sweeper(
            self.index,
            self.leases,
            self.wake,
            interval_s=settings.sweep_interval_s,
            deadlines=WaitDeadlines(self.traces, actor=actor),
        )
        self.slots = Slots(settings.concurrency)
        """Turns in flight: wake-ups and the sweeper's takeovers share them."""
        self._waking: set[str] = set()

    # ------------------------------------------------------------------ lifecycle

    async def run(self) -> None:
        """Serve until ``ctx.shutdown`` is set, then shut down gracefully. The MCP servers
        start first, so that the first turns see their tools."""
        await self.tools.start()
        try:
            await self._serve()
        finally:
            await self.tools.aclose()

    async def _import_connection(self) -> Connection:
        """The connection imported logs are written on: the import writer's own NATS user
        when one is set (only it may publish every trace event type), else the executor's."""
        user = self.settings.import_user
        if user is None:
            return self.ctx.conn
        nats = self.ctx.config.nats.model_copy(
            update={"user": user, "password": self.settings.import_password}
        )
        return await connect(nats, name=f"{self.settings.id}-importer")

    async def _serve(self) -> None:
        spec = consumer_spec(self.ctx.conn.names, self.settings)
        port = self.settings.metrics_port
        http = self.metrics.serve(port) if port is not None else None
        # before any turn starts: a running turn hears of a stop request at once (``stops``)
        stops = await self.ctx.conn.nc.subscribe(
            self.turns.stops.subject, cb=self.turns.stops.on_message
        )
        await self._reclaim(self.settings.id)
        exits = await self.ctx.conn.nc.subscribe(
            self.ctx.conn.names.process_exits, cb=self._on_process_exit
        )
        erasures = await self.ctx.conn.nc.subscribe(
            self.ctx.conn.names.erasures, cb=self.workdirs.on_request
        )
        importer = await self._import_connection()
        writer = ImportWriter(
            self.ctx.traces_over(importer),
            TraceIndex(importer),
            Leases(importer, self.settings.id, self.ctx.config.store.lease_ttl_s),
            self.wake,
        )
        imports = await importer.nc.subscribe(
            importer.names.imports, queue=IMPORT_QUEUE, cb=writer.on_request
        )
        presence = Presence(await self._announce())
        self.ctx.spawn(self.sweeper.run(self.ctx.shutdown), name="sweeper")
        waits = RemoteWaits(
            self.ctx.conn,
            self.traces,
            self.remote,
            durable=f"{self.settings.durable}-remote",
            actor=self.actor,
            ack_wait_s=self.settings.ack_wait_s,
            on_finished=self.children.start_queued,
        )
        self.ctx.spawn(waits.run(self.ctx.shutdown), name="remote-waits")
        self.ctx.spawn(self._stay_present(presence), name="presence")
        log.info("executor %s ready", self.settings.id)
        try:
            await consume(
                self.ctx.conn,
                spec,
                self._handle,
                self.ctx.shutdown,
                hooks=WakeupHooks(self),
                slots=self.slots,
            )
        finally:
            with contextlib.suppress(Exception):
                await exits.unsubscribe()
                await erasures.unsubscribe()
                await imports.unsubscribe()
                await stops.unsubscribe()
            if importer is not self.ctx.conn:
                await importer.close()
            if presence.lease is not None:
                await presence.lease.release()
            await self.agent.aclose()
            await self.remote.aclose()
            if http is not None:
                await asyncio.to_thread(_stop_http, http)
            log.info("executor %s stopped", self.settings.id)

    async def _stay_present(self, presence: Presence) -> None:
        """Hold ``executor.<id>`` while this replica consumes. A presence lost in a broker
        outage longer than its TTL is taken again once NATS answers (the key expires first):
        else the gateway would say, for ever, that no executor is consuming."""
        while not self.ctx.shutdown.is_set():
            lease = presence.lease
            if lease is not None:
                await lease.keep(lambda: None)
                if lease.released:
                    return
                log.warning("executor %s lost its presence; announcing again", self.settings.id)
            try:
                presence.lease = await self._announce()
            except Exception as exc:  # NATS still away: try again after a pause
                log.warning("executor %s presence: %s", self.settings.id, exc)
                presence.lease = None
            if presence.lease is None:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self.ctx.shutdown.wait(), self.leases.ttl_s / 3)

    async def _announce(self) -> Lease | None:
        """``executor.<id>`` in ``lh_leases`` while this replica lives (ops and tests), with
        whether its tools run confined (the gateway's ``/readyz`` shows it)."""
        # the first Sandbox here probes bwrap (a subprocess): off the event loop
        state = await asyncio.to_thread(lambda: Sandbox(self.ctx.config.sandbox).state())
        log.info("executor %s sandbox: %s", self.settings.id, state)
        return await self.leases.acquire(Leases.presence_key(self.settings.id), sandbox=state)

    async def _reclaim(self, owner: str, incarnation: str | None = None) -> None:
        """Release the leases a dead incarnation of ``owner`` held and run those traces now:
        at start-up our own predecessor's (a restarted process never waits on itself), and a
        peer's when its supervisor reports it dead."""
        try:
            released = await self.leases.release_dead(owner, incarnation=incarnation)
        except Exception:
            log.exception("could not release the leases of %s; their TTL will", owner)
            return
        for trace_id in released:
            if not self.wake(trace_id):
                log.info("no free slot for %s; the sweeper will take it", trace_id)
        if released:
            log.info("took over %d trace(s) of a dead %s", len(released), owner)

    async def _on_process_exit(self, msg: Msg) -> None:
        try:
            notice = msgspec.json.decode(msg.data, type=ProcessExited)
        except msgspec.DecodeError:
            log.warning("ignoring a malformed process-exit notice")
            return
        if notice.service == "executor" and notice.incarnation != self.leases.incarnation:
            self.ctx.spawn(self._reclaim(notice.id, notice.incarnation), name="reclaim")

    def wake(self, trace_id: str) -> bool:
        """Run ``trace_id`` now if a slot is free (the sweeper's way in)."""
        if trace_id in self._waking or self.ctx.shutdown.is_set():
            return False
        if not self.slots.try_start(self._swept(trace_id), name=f"sweep-{trace_id}"):
            return False
        self._waking.add(trace_id)
        self.metrics.swept.inc()
        return True

    async def _swept(self, trace_id: str) -> None:
        try:
            await self.turns.drive(trace_id, takeover=True)
        finally:
            self._waking.discard(trace_id)

    # ------------------------------------------------------------------ one wake-up

    async def _handle(self, delivery: Delivery) -> float | None:
        if not is_wakeup(delivery):
            log.warning(
                "ignoring an unexpected wake-up %s of %s",
                delivery.event_type,
                delivery.aggregate_id,
            )
            return None
        trace_id, event_type = delivery.aggregate_id, delivery.event_type
        if event_type in SPAWN_TYPES:
            parent = await self.traces.load(trace_id)
            await self.children.start_queued(parent)
        elif event_type in FINAL_TYPES:
            state = await self.traces.load(trace_id)
            await self.children.on_child_final(state)
            if state.is_final and state.running_subtraces():
                await self.children.stop_children(state, reason=f"parent {state.status}")
        elif await self.turns.drive(trace_id, takeover=delivery.redelivered):
            # Work left that nobody does: the wake-up comes back once our lost lease can be
            # taken (expired, or stale if the server failed to expire it).
            return self.leases.ttl_s * (STALE_TTLS + 1)
        return None

    async def failed(self, delivery: Delivery, exc: Exception) -> float | str:
        """A wake-up whose handling raised: retried with backoff, poison after
        ``poison_attempts`` (the trace fails with the reason; the message is terminated)."""
        self.metrics.handler_errors.inc()
        if isinstance(exc, BrokerUnavailable):  # the broker's trouble, not the event's
            log.warning("%s; handing the wake-up back", exc)
            return MAX_RETRY_DELAY_S
        if is_storage_full(exc):  # nothing was written; the trace goes on once there is room
            self.ctx.storage.refused(exc)
            log.warning("%s: storage full, handing the wake-up back", delivery.aggregate_id)
            return MAX_RETRY_DELAY_S
        attempt = delivery.num_delivered
        reason = f"{type(exc).__name__}: {exc}"
        trace_id, event_type = delivery.aggregate_id, delivery.event_type
        if attempt < self.settings.poison_attempts:
            log.warning(
                "handling %s of %s failed (attempt %d): %s", event_type, trace_id, attempt, reason
            )
            return min(MAX_RETRY_DELAY_S, 0.25 * 2 ** (attempt - 1))
        log.error(
            "poison wake-up %s of %s after %d attempts: %s",
            event_type,
            trace_id,
            attempt,
            reason,
            exc_info=exc,
        )
        self.metrics.poison.inc()
        try:
            await record_poison(
                self.traces,
                self.index,
                trace_id,
                f"poison event ({event_type}): {reason}",
                actor=self.actor,
            )
        except Exception:
            log.exception("could not record the poison failure on %s", trace_id)
        return TERM


class WakeupHooks(ConsumerHooks):
    """The executor's part of the consumer loop: no per-trace lock (the lease is the lock),
    no consumer span (a turn has its own, continuing the run), poison handling."""

    spans = False

    def __init__(self, executor: Executor) -> None:
        self.executor = executor

    def key(self, delivery: Delivery) -> str | None:
        return None

    async def failed(self, spec: ConsumerSpec, delivery: Delivery, exc: Exception) -> float | str:
        return await self.executor.failed(delivery, exc)


@dataclass
class Presence:
    """The current ``executor.<id>`` lease (``None`` while it is not held)."""

    lease: Lease | None


def _stop_http(server: WSGIServer) -> None:
    server.shutdown()
    server.server_close()
