"""The executor service: competing consumer on trace wake-ups, turns under leases, sweeper.

Each delivered wake-up is handled in its own task (at most ``concurrency`` at once per
replica) and kept alive with ``in_progress`` while it runs, so a long turn is not redelivered
elsewhere. A handling that raises is retried with backoff; after ``poison_attempts`` the
message is terminated and the trace failed with the reason, without holding up other traces.
On shutdown the replica stops fetching, lets running turns finish for a grace period, then
cancels them: their leases are released and their wake-ups handed back for another replica.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any
from wsgiref.simple_server import WSGIServer

import msgspec
import nats.errors
from longhaul.agent.tools.sandbox import Sandbox
from longhaul.core.consumer import Fetcher, keep_alive, send_ack
from longhaul.core.service import ServiceContext
from longhaul.core.transient import BrokerUnavailable, retry_transient
from longhaul.domain.liveness import ProcessExited
from longhaul.executor.agent_turns import AgentTurns
from longhaul.executor.children import Children
from longhaul.executor.leases import Lease, Leases
from longhaul.executor.metrics import ExecutorMetrics
from longhaul.executor.poison import record_poison
from longhaul.executor.remote import RemoteAgents, RemoteWaits
from longhaul.executor.settings import ExecutorSettings
from longhaul.executor.sweeper import Sweeper
from longhaul.executor.tools import ExecutorTools
from longhaul.executor.turn import TurnRunner, TurnSettings
from longhaul.executor.wakeups import (
    FINAL_TYPES,
    SPAWN_TYPES,
    Wakeup,
    consumer_config,
    parse_wakeup,
    subscribe,
)
from nats.aio.msg import Msg
from nats.js import JetStreamContext

log = logging.getLogger(__name__)

FETCH_TIMEOUT_S = 1.0
MAX_RETRY_DELAY_S = 10.0


class Executor:
    def __init__(
        self,
        ctx: ServiceContext,
        settings: ExecutorSettings,
        agent: AgentTurns,
        tools: ExecutorTools,
        remote: RemoteAgents | None = None,
    ) -> None:
        self.ctx = ctx
        self.settings = settings
        self.agent = agent
        self.tools = tools
        self.traces = ctx.traces
        self.index = ctx.index
        self.metrics = ExecutorMetrics()
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
        )
        self.turns = TurnRunner(
            ctx,
            self.leases,
            agent,
            self.metrics,
            TurnSettings(actor=actor, index_interval_s=settings.index_interval_s),
        )
        self.sweeper = Sweeper(
            self.index, self.leases, self.wake, interval_s=settings.sweep_interval_s
        )
        self._free = settings.concurrency
        self._slot_freed = asyncio.Event()
        self._work: set[asyncio.Task[Any]] = set()
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

    async def _serve(self) -> None:
        config = consumer_config(
            self.ctx.conn.names,
            self.settings.durable,
            ack_wait_s=self.settings.ack_wait_s,
            max_deliver=self.settings.poison_attempts * 4,
            max_ack_pending=max(1000, self.settings.concurrency * 64),
        )
        sub = await subscribe(self.ctx.conn.js, self.ctx.conn.names, config)
        port = self.settings.metrics_port
        http = self.metrics.serve(port) if port is not None else None
        await self._reclaim(self.settings.id)
        exits = await self.ctx.conn.nc.subscribe(
            self.ctx.conn.names.process_exits, cb=self._on_process_exit
        )
        presence = await self._announce()
        self.ctx.spawn(self.sweeper.run(self.ctx.shutdown), name="sweeper")
        waits = RemoteWaits(
            self.ctx.conn.js,
            self.ctx.conn.names,
            self.traces,
            self.remote,
            durable=f"{self.settings.durable}-remote",
            actor=self.actor,
            ack_wait_s=self.settings.ack_wait_s,
            on_finished=self.children.start_queued,
        )
        self.ctx.spawn(waits.run(self.ctx.shutdown), name="remote-waits")
        if presence is not None:
            self.ctx.spawn(presence.keep(lambda: None), name="presence")
        log.info("executor %s ready", self.settings.id)
        try:
            await self._fetch_loop(sub)
        finally:
            await self._drain()
            with contextlib.suppress(Exception):
                await sub.unsubscribe()
            with contextlib.suppress(Exception):
                await exits.unsubscribe()
            if presence is not None:
                await presence.release()
            await self.agent.aclose()
            await self.remote.aclose()
            if http is not None:
                await asyncio.to_thread(_stop_http, http)
            log.info("executor %s stopped", self.settings.id)

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

    async def _fetch_loop(self, sub: JetStreamContext.PullSubscription) -> None:
        shutdown = self.ctx.shutdown
        fetcher = Fetcher(sub, idle_timeout_s=FETCH_TIMEOUT_S)
        while not shutdown.is_set():
            if self._free == 0:
                self._slot_freed.clear()
                await _first(self._slot_freed.wait(), shutdown.wait())
                continue
            try:
                messages = await fetcher.next(limit=self._free)
            except (TimeoutError, nats.errors.TimeoutError):
                continue
            except nats.errors.Error as exc:
                log.warning("fetch failed: %s", exc)
                await _first(shutdown.wait(), asyncio.sleep(FETCH_TIMEOUT_S))
                continue
            for msg in messages:
                self._start(self._handle(msg), name=f"wakeup-{msg.subject}")

    async def _drain(self) -> None:
        if self._work:
            await asyncio.wait(set(self._work), timeout=self.settings.shutdown_grace_s)
        for task in list(self._work):
            task.cancel()
        await asyncio.gather(*self._work, return_exceptions=True)

    def _start(self, coro: Any, *, name: str) -> None:
        self._free -= 1
        task = asyncio.create_task(coro, name=name)
        self._work.add(task)
        task.add_done_callback(self._finished)

    def _finished(self, task: asyncio.Task[Any]) -> None:
        self._work.discard(task)
        self._free += 1
        self._slot_freed.set()
        if not task.cancelled() and task.exception() is not None:
            log.error("executor task %s crashed", task.get_name(), exc_info=task.exception())

    def wake(self, trace_id: str) -> bool:
        """Run ``trace_id`` now if a slot is free (the sweeper's way in)."""
        if self._free == 0 or trace_id in self._waking or self.ctx.shutdown.is_set():
            return False
        self._waking.add(trace_id)
        self.metrics.swept.inc()
        self._start(self._swept(trace_id), name=f"sweep-{trace_id}")
        return True

    async def _swept(self, trace_id: str) -> None:
        try:
            await self.turns.drive(trace_id, takeover=True)
        finally:
            self._waking.discard(trace_id)

    # ------------------------------------------------------------------ one wake-up

    async def _handle(self, msg: Msg) -> None:
        wakeup = parse_wakeup(self.ctx.conn.names, msg.subject)
        if wakeup is None:
            log.warning("terminating unexpected wake-up subject %s", msg.subject)
            await send_ack(msg.term())
            return
        heartbeat = asyncio.create_task(keep_alive(msg, self.settings.ack_wait_s / 3))
        try:
            redelivered = msg.metadata.num_delivered > 1
            await retry_transient(
                lambda: self._dispatch(wakeup, redelivered=redelivered),
                what=f"{wakeup.event_type} of {wakeup.trace_id}",
            )
        except asyncio.CancelledError:
            await send_ack(msg.nak())  # shutting down: another replica takes it now
            raise
        except Exception as exc:
            await self._failed(msg, wakeup, exc)
        else:
            await send_ack(msg.ack())
        finally:
            heartbeat.cancel()

    async def _dispatch(self, wakeup: Wakeup, *, redelivered: bool) -> None:
        if wakeup.event_type in SPAWN_TYPES:
            parent = await self.traces.load(wakeup.trace_id)
            await self.children.start_queued(parent)
        elif wakeup.event_type in FINAL_TYPES:
            state = await self.traces.load(wakeup.trace_id)
            await self.children.on_child_final(state)
            if state.is_final and state.running_subtraces():
                await self.children.stop_children(state, reason=f"parent {state.status}")
        else:
            await self.turns.drive(wakeup.trace_id, takeover=redelivered)

    async def _failed(self, msg: Msg, wakeup: Wakeup, exc: Exception) -> None:
        self.metrics.handler_errors.inc()
        if isinstance(exc, BrokerUnavailable):  # the broker's trouble, not the event's
            log.warning("%s; handing the wake-up back", exc)
            await send_ack(msg.nak(delay=MAX_RETRY_DELAY_S))
            return
        attempt = msg.metadata.num_delivered
        reason = f"{type(exc).__name__}: {exc}"
        if attempt < self.settings.poison_attempts:
            log.warning(
                "handling %s of %s failed (attempt %d): %s",
                wakeup.event_type,
                wakeup.trace_id,
                attempt,
                reason,
            )
            await send_ack(msg.nak(delay=min(MAX_RETRY_DELAY_S, 0.25 * 2 ** (attempt - 1))))
            return
        log.error(
            "poison wake-up %s of %s after %d attempts: %s",
            wakeup.event_type,
            wakeup.trace_id,
            attempt,
            reason,
            exc_info=exc,
        )
        self.metrics.poison.inc()
        try:
            await record_poison(
                self.traces,
                self.index,
                wakeup.trace_id,
                f"poison event ({wakeup.event_type}): {reason}",
                actor=self.actor,
            )
        except Exception:
            log.exception("could not record the poison failure on %s", wakeup.trace_id)
        await send_ack(msg.term())


def _stop_http(server: WSGIServer) -> None:
    server.shutdown()
    server.server_close()


async def _first(*aws: Any) -> None:
    """Wait until the first of ``aws`` completes; cancel the others."""
    tasks = [asyncio.ensure_future(aw) for aw in aws]
    try:
        await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
