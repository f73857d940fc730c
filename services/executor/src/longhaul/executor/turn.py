"""One trace's turns: lease → snapshot + tail → decide → engine → release → look again.

Whoever holds a trace's lease is the only one running it. A wake-up that finds the lease
taken is simply acknowledged: the holder re-reads the log *after* releasing, so an event that
arrived while it held the lease is never missed (the lease holder's in-flight wake-up, or the
sweeper, covers a holder that died instead). While the engine runs, a keeper renews the lease;
if the lease is lost the turn is cancelled at once, so two executors never run one trace.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Any

from longhaul.agent.contract import LiveCallback, LiveUpdate, StaleState, TurnOutcome
from longhaul.core.index import TraceIndex
from longhaul.core.logs import current_trace_id
from longhaul.core.store import EventStore
from longhaul.domain import events as ev
from longhaul.domain.state import TraceState
from longhaul.executor.appends import append_while
from longhaul.executor.decide import Action, decide
from longhaul.executor.leases import Lease, Leases
from longhaul.executor.live import LivePublisher
from longhaul.executor.metrics import ExecutorMetrics
from longhaul.executor.sink import TraceSink
from longhaul.executor.upkeep import TurnUpkeep

log = logging.getLogger(__name__)

RunTurn = Callable[[TraceState, TraceSink, LiveCallback], Coroutine[Any, Any, TurnOutcome]]
"""Runs one engine turn on ``state``, emitting through the sink (``agent_turns.AgentTurns``)."""

MAX_ROUNDS = 8
"""Turns one wake-up may run back to back (stale-state restarts, events during a turn)."""


@dataclass
class TurnSettings:
    actor: str
    index_interval_s: float


class TurnRunner:
    def __init__(
        self,
        store: EventStore,
        index: TraceIndex,
        leases: Leases,
        run_turn: RunTurn,
        metrics: ExecutorMetrics,
        settings: TurnSettings,
    ) -> None:
        self.store = store
        self.index = index
        self.leases = leases
        self.run_turn = run_turn
        self.metrics = metrics
        self.settings = settings

    async def drive(self, trace_id: str, *, takeover: bool = False) -> None:
        """Do whatever the trace needs now, unless another executor holds it."""
        token = current_trace_id.set(trace_id)
        try:
            for round_ in range(MAX_ROUNDS):
                lease = await self.leases.acquire(Leases.trace_key(trace_id))
                if lease is None:
                    if round_ == 0:
                        await self._hand_to_sweeper(trace_id)
                    return
                try:
                    state = await self._work(trace_id, lease, takeover=takeover)
                finally:
                    await lease.release()
                if state is None:
                    return
                takeover = False
                # Events that came while we held the lease were acked by whoever saw it busy.
                await self.store.catch_up("trace", trace_id, state)
                if decide(state) is Action.NOTHING:
                    return
        finally:
            current_trace_id.reset(token)

    async def _hand_to_sweeper(self, trace_id: str) -> None:
        """The lease is held elsewhere. A live holder re-reads the log when it lets go; a
        crashed one never will. Publishing the trace's current status in the index (e.g.
        ``running`` again after a human reply, where the holder last wrote ``waiting``) lets
        the sweeper pick the trace up once that lease has expired."""
        state = await self.store.load_trace(trace_id)
        if state.exists:
            await self.index.update(state)

    async def _work(self, trace_id: str, lease: Lease, *, takeover: bool) -> TraceState | None:
        """Act once under the lease; returns the state reached (None if the lease was lost)."""
        state = await self.store.load_trace(trace_id)
        action = decide(state)
        if action is Action.NOTHING:
            if state.exists:  # a stale entry would keep the sweeper coming back
                await self.index.update(state)
            return state
        if action is Action.STOP:
            await append_while(
                self.store,
                state,
                ev.Stopped(reason="stop_requested"),
                lambda s: s.exists and not s.is_final and s.stop_requested,
                actor=self.settings.actor,
            )
            await self.index.update(state)
            return state
        if takeover:
            self.metrics.lease_takeovers.inc()
        return await self._run_agent(state, lease)

    async def _run_agent(self, state: TraceState, lease: Lease) -> TraceState | None:
        upkeep = TurnUpkeep(self.store, self.index, interval_s=self.settings.index_interval_s)
        sink = TraceSink(
            self.store,
            state,
            actor=self.settings.actor,
            lease=lease,
            metrics=self.metrics,
            upkeep=upkeep,
        )
        live = LivePublisher(self.store.conn.nc, self.store.conn.names.live(state.trace_id))
        self.metrics.active_turns.inc()
        turn = asyncio.create_task(self.run_turn(state, sink, live), name=f"turn-{state.trace_id}")
        keeper = asyncio.create_task(lease.keep(turn.cancel), name=f"lease-{state.trace_id}")
        end = "error"
        try:
            end = (await turn).end
            await live(LiveUpdate(kind="status", text=state.status or end))
            return state
        except StaleState as exc:
            end = "stale"
            log.info("turn on %s ended on stale state: %s", state.trace_id, exc)
            return state
        except asyncio.CancelledError:
            if lease.lost.is_set() and turn.cancelled():
                end = "lease_lost"
                self.metrics.leases_lost.inc()
                log.warning("lease on %s lost mid-turn; turn cancelled", state.trace_id)
                return None
            raise
        finally:
            self.metrics.active_turns.dec()
            self.metrics.turns.labels(end=end).inc()
            keeper.cancel()
            if not turn.done():
                turn.cancel()
            for task in (turn, keeper):
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task
            with contextlib.suppress(Exception):
                await upkeep.finish(state)
