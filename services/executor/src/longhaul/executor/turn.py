"""One trace's turns: lease → snapshot + tail → decide → engine → release → look again.

Whoever holds a trace's lease is the only one running it. A wake-up that finds the lease
taken is simply acknowledged: the holder re-reads the log *after* releasing, so an event that
arrived while it held the lease is never missed (the lease holder's in-flight wake-up, or the
sweeper, covers a holder that died instead). While the engine runs, a keeper renews the lease;
if the lease is lost the turn is cancelled at once, so two executors never run one trace.
A stop request heard meanwhile (``stops``) cancels only the model call in flight: the engine
ends the turn (``StopSignalled``) and the next round reads the log and records the stop.
Each turn is an ``invoke_agent`` span under the run's recorded trace context
(``longhaul.core.telemetry``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Any

from longhaul.agent.contract import (
    LiveCallback,
    LiveUpdate,
    StaleState,
    StopSignal,
    StopSignalled,
    TurnOutcome,
)
from longhaul.core.index import TraceIndex
from longhaul.core.logs import current_trace_id
from longhaul.core.repository import Repository
from longhaul.core.service import ServiceContext
from longhaul.core.telemetry import context_of, tracer
from longhaul.domain import events as ev
from longhaul.domain.state import TraceState
from longhaul.executor.appends import append_while
from longhaul.executor.background_writes import TurnBackgroundWrites
from longhaul.executor.decide import Action, decide
from longhaul.executor.leases import Lease, Leases
from longhaul.executor.live import LivePublisher
from longhaul.executor.metrics import ExecutorMetrics
from longhaul.executor.sink import TraceSink
from longhaul.executor.stops import StopSignals
from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.trace import Span, SpanKind, StatusCode

log = logging.getLogger(__name__)

RunTurn = Callable[
    [TraceState, TraceSink, LiveCallback, StopSignal], Coroutine[Any, Any, TurnOutcome]
]
"""Runs one engine turn on ``state``, emitting through the sink, its model call cut short once
the stop signal is set (``agent_turns.AgentTurns``)."""

MAX_ROUNDS = 8
"""Turns one wake-up may run back to back (stale-state restarts, events during a turn)."""


@dataclass
class TurnRunnerSettings:
    """The executor's settings for running turns (the engine's own are ``TurnSettings``)."""

    actor: str
    index_interval_s: float


def turn_span(state: TraceState, actor: str) -> Span:
    """The span of one executor turn (GenAI ``invoke_agent``), a child of the request that
    started the trace's current run, whichever executor runs it and however often it resumed."""
    attributes: dict[str, str | int] = {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.agent.name": state.config.preset,
        "gen_ai.conversation.id": state.trace_id,
        "longhaul.trace.id": state.trace_id,
        "longhaul.trace.run": state.runs,
        "longhaul.executor": actor,
    }
    for key, value in (
        ("longhaul.trace.parent_id", state.parent_trace_id),
        ("longhaul.task.id", state.task_id),
        ("longhaul.phase.id", state.phase_id),
    ):
        if value:
            attributes[key] = value
    return tracer().start_span(
        f"invoke_agent {state.config.preset}",
        context=context_of(state.run_trace_context) or Context(),  # none recorded: a root
        kind=SpanKind.INTERNAL,
        attributes=attributes,
    )


class TurnRunner:
    def __init__(
        self,
        ctx: ServiceContext,
        leases: Leases,
        run_turn: RunTurn,
        metrics: ExecutorMetrics,
        settings: TurnRunnerSettings,
    ) -> None:
        self.ctx = ctx
        self.traces: Repository[TraceState] = ctx.traces
        self.index: TraceIndex = ctx.index
        self.leases = leases
        self.run_turn = run_turn
        self.metrics = metrics
        self.settings = settings
        self.stops = StopSignals(ctx.conn.names)
        """Fed by the executor's subscription to ``stop_requested`` (``stops``)."""

    async def drive(self, trace_id: str, *, takeover: bool = False) -> bool:
        """Do whatever the trace needs now, unless another executor holds it. True when work
        is left that nobody is doing: the lease was lost mid-turn (the broker's trouble), or
        the rounds ran out — the caller asks again later rather than trust the sweeper to find
        a trace whose index entry the same trouble may have kept from being written."""
        token = current_trace_id.set(trace_id)
        try:
            for round_ in range(MAX_ROUNDS):
                lease = await self.leases.acquire(Leases.trace_key(trace_id))
                if lease is None:
                    if round_ == 0:
                        await self._hand_to_sweeper(trace_id)
                    return False
                try:
                    with self.stops.watch(trace_id) as stop:  # before the trace is loaded
                        state = await self._work(trace_id, lease, stop, takeover=takeover)
                finally:
                    await lease.release()
                if state is None:
                    return True
                takeover = False
                # Events that came while we held the lease were acked by whoever saw it busy.
                await self.traces.catch_up(trace_id, state)
                if decide(state) is Action.NOTHING:
                    return False
            return True
        finally:
            current_trace_id.reset(token)

    async def _hand_to_sweeper(self, trace_id: str) -> None:
        """The lease is held elsewhere. A live holder re-reads the log when it lets go; a
        crashed one never will. Publishing the trace's current status in the index (e.g.
        ``running`` again after a human reply, where the holder last wrote ``waiting``) lets
        the sweeper pick the trace up once that lease has expired."""
        state = await self.traces.load(trace_id)
        if state.exists:
            await self.index.update(state)

    async def _work(
        self, trace_id: str, lease: Lease, stop: StopSignal, *, takeover: bool
    ) -> TraceState | None:
        """Act once under the lease; returns the state reached (None if the lease was lost)."""
        state = await self.traces.load(trace_id)
        action = decide(state)
        if action is Action.NOTHING:
            if state.exists:  # a stale entry would keep the sweeper coming back
                await self.index.update(state)
            return state
        if action is Action.STOP:
            await append_while(
                self.traces,
                state,
                ev.Stopped(reason="stop_requested"),
                lambda s: s.exists and not s.is_final and s.stop_requested,
                actor=self.settings.actor,
            )
            await self.index.update(state)
            return state
        if takeover:
            self.metrics.lease_takeovers.inc()
        return await self._run_agent(state, lease, stop)

    async def _run_agent(
        self, state: TraceState, lease: Lease, stop: StopSignal
    ) -> TraceState | None:
        background_writes = TurnBackgroundWrites(
            self.ctx.snapshotter(), self.index, interval_s=self.settings.index_interval_s
        )
        sink = TraceSink(
            self.traces,
            state,
            actor=self.settings.actor,
            lease=lease,
            metrics=self.metrics,
            background_writes=background_writes,
        )
        live = LivePublisher(self.ctx.conn.nc, self.ctx.conn.names.live(state.trace_id))
        self.metrics.active_turns.inc()
        span = turn_span(state, self.settings.actor)
        with trace.use_span(span):  # the turn's task starts in (a copy of) this context
            turn = asyncio.create_task(
                self.run_turn(state, sink, live, stop), name=f"turn-{state.trace_id}"
            )
        keeper = asyncio.create_task(lease.keep(turn.cancel), name=f"lease-{state.trace_id}")
        end = "error"
        try:
            end = (await turn).end
            await sink.settle()
            await background_writes.at_rest(state)
            await live(LiveUpdate(kind="status", text=state.status or end))
            return state
        except StopSignalled as exc:
            end = "interrupted"  # the next round reads the log and records the stop
            log.info("turn on %s cut short: %s", state.trace_id, exc)
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
            span.set_attribute("longhaul.turn.end", end)
            if end in ("error", "lease_lost"):
                span.set_status(StatusCode.ERROR, end)
            span.end()
            self.metrics.active_turns.dec()
            self.metrics.turns.labels(end=end).inc()
            keeper.cancel()
            if not turn.done():
                turn.cancel()
            for task in (turn, keeper):
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task
            await live.close()
            with contextlib.suppress(Exception):
                await background_writes.finish(state)
