"""``provider-down``: the primary model provider goes down mid-run for a while under load; every
trace that met the outage must finish on its fallback, with every switch on its log, no step
lost or taken twice, and the shared circuit breaker keeping the dead provider's traffic small.

``longhaul up --executors 2`` talks to two loopback fakes speaking the real wire formats: the
primary :class:`FakeOpenAI` and the fallback :class:`FakeAnthropic` (a switch across
providers, so the conversation is translated). Both answer with :class:`RecordSteps`: the
trace's first message says how many ``record`` steps to take, and each request's own
conversation says which step is next, so the fallback carries on where the primary stopped.
Each trace is started through ``POST /api/traces`` with ``model_fallback``. Once every trace
has taken ``lead_steps`` steps, the primary answers 503 to every request for ``outage_s``
seconds, and longer if a trace running at its start has not met it yet (has not moved to its
fallback: on a loaded box a trace may stall for seconds), then serves again; a switch is kept
for the rest of the run.

Then ``late`` traces more start while the primary is still down, once its circuit is open
(5 outages in 60 s by default): they must skip the primary without a request (``circuit_open``),
as the runs that wait for their turn during an outage do.

Reported, besides the suite's columns (finished / lost / duplicated / unpaired / run twice):
traces mid-run at the outage, traces that switched, and that finished on the fallback;
switches by reason (``circuit_open``: skipped without a request, the breaker at work);
fallback requests of a trace with no ``model_switched`` on its log (a switch off the log); the
requests each fake received (the primary before, during and after the outage); and the
1-minute load average.

The issue's other half of this scenario (a key at its daily spend limit has its runs asking,
not failing) is to run in the same ``longhaul up``: pass it as a :class:`Rider`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

import nats.errors
import nats.js.errors
from longhaul.client import AsyncClient
from longhaul.core.connection import Connection, connect
from longhaul.core.store import EventStore
from longhaul.domain import events as ev
from longhaul.domain.circuits import decode
from longhaul.llm.fallback import provider_of

from tests.chaos.suite import TOOLS, Row, _check, _wait_final
from tests.chaos.up import Up, admin_config
from tests.support.env import service_env
from tests.support.folds import trace_state
from tests.support.llm_fakes import Fail, FakeAnthropic, FakeOpenAI, RecordSteps, steps_prompt

SCENARIO = "provider-down"
PRIMARY = "openai:fake-model"
FALLBACK = "anthropic:fake-model"
DOWN = Fail(503, "The server is overloaded or not ready yet.")


class Rider(Protocol):
    """Another part of the scenario run in the same ``longhaul up``, through the outage (issue
    45's key at its daily spend limit): its configuration, what it starts once the stack is up,
    and what it found wrong at the end (each problem makes the run unclean)."""

    def env(self) -> dict[str, str]: ...

    async def start(self, gateway: str, store: EventStore) -> None: ...

    async def check(self, store: EventStore) -> list[str]: ...


@dataclass
class OutageRow:
    row: Row = field(default_factory=lambda: Row(SCENARIO))
    outage_s: float = 0.0
    """How long the primary was down."""
    mid_run: int = 0
    """Traces not finished when the primary went down."""
    switched: int = 0
    on_fallback: int = 0
    """Traces whose run ended on the fallback model."""
    reasons: Counter[str] = field(default_factory=Counter)
    unlogged: int = 0
    """Traces the fallback served with no ``model_switched`` on their log."""
    primary_before: int = 0
    primary_during: int = 0
    primary_after: int = 0
    fallback_requests: int = 0
    most_dead_calls: int = 0
    """The most 503s one trace's conversation received."""
    late: int = 0
    """Traces started during the outage once the primary's circuit was open."""
    late_dead_calls: int = 0
    """503s the late traces received (the breaker should spare them all)."""
    load: tuple[float, float] = (0.0, 0.0)
    """The 1-minute load average when the outage began and at the end."""
    problems: list[str] = field(default_factory=list)

    @property
    def clean(self) -> bool:
        return (
            self.row.clean
            and self.row.finished == self.row.aggregates
            and self.switched == self.mid_run + self.late == self.on_fallback
            and not self.unlogged
            and not self.problems
        )


def render_outage(out: OutageRow, title: str) -> str:
    reasons = ", ".join(f"{k} {n}" for k, n in sorted(out.reasons.items())) or "-"
    lines = [
        f"### {title}",
        "",
        "| traces | finished | lost | duplicated | unpaired | run twice | down (s) "
        "| mid-run at outage "
        "| switched | on fallback | switches by reason | switch off the log "
        "| primary requests before / during / after | most 503s one trace "
        "| late traces (503s) | fallback requests "
        "| load 1 min (start / end) |",
        "|" + " --- |" * 17,
        f"| {out.row.aggregates} | {out.row.finished} | {out.row.lost} | {out.row.duplicated} "
        f"| {out.row.unpaired} | {out.row.run_twice} | {out.outage_s:.0f} | {out.mid_run} "
        f"| {out.switched} "
        f"| {out.on_fallback} | {reasons} | {out.unlogged} | {out.primary_before} / "
        f"{out.primary_during} / {out.primary_after} | {out.most_dead_calls} "
        f"| {out.late} ({out.late_dead_calls}) "
        f"| {out.fallback_requests} | {out.load[0]:.1f} / {out.load[1]:.1f} |",
    ]
    notes = out.row.notes[:5] + out.problems[:5]
    return "\n".join(lines + [f"- {note}" for note in notes])


async def run_provider_down(
    root: Path,
    *,
    traces: int = 12,
    steps: int = 20,
    hold_ms: int = 150,
    outage_s: float = 60.0,
    lead_steps: int = 2,
    late: int = 0,
    provider: dict[str, float] | None = None,
    circuit: dict[str, float] | None = None,
    riders: Sequence[Rider] = (),
    api_key: str | None = None,
) -> OutageRow:
    """``provider``: the primary's retry settings (``models.providers.openai``; the defaults
    otherwise: 5 retries, backoff from 0.5 s); ``circuit``: ``models.circuit``; ``api_key``:
    the key the scenario's traces run under (when a rider sets the gateway's keys)."""
    out = OutageRow()
    steps_log = root / "steps.jsonl"
    steps_log.touch()
    async with (
        FakeOpenAI(default=RecordSteps()) as primary,
        FakeAnthropic(default=RecordSteps()) as fallback,
    ):
        env = {
            **service_env(),
            "LONGHAUL_EXECUTOR__TOOL_MODULES": TOOLS,
            "LONGHAUL_MODELS__PROVIDERS": json.dumps({"openai": provider or {}}),
            "LONGHAUL_MODELS__CIRCUIT": json.dumps(circuit or {}),
            "OPENAI_BASE_URL": primary.base_url,
            "OPENAI_API_KEY": primary.api_key,
            "ANTHROPIC_BASE_URL": fallback.base_url,
            "ANTHROPIC_API_KEY": fallback.api_key,
            "PYTHONUNBUFFERED": "1",
        }
        for rider in riders:
            env.update(rider.env())
        up = Up(root, env)
        state = await up.start()
        conn = await connect(admin_config(state))
        store = EventStore(conn)
        stack = contextlib.AsyncExitStack()
        try:
            for rider in riders:
                await rider.start(state["gateway"], store)
            client = await stack.enter_async_context(
                AsyncClient(state["gateway"], api_key=api_key, timeout=30)
            )

            async def start(numbers: range) -> list[str]:
                return [
                    (
                        await client.create_trace(
                            steps_prompt(
                                f"outage trace {n}",
                                steps=steps,
                                log=str(steps_log),
                                hold_ms=hold_ms,
                            ),
                            name=f"outage trace {n}",
                            model=PRIMARY,
                            model_fallback=[FALLBACK],
                        )
                    ).trace_id
                    for n in numbers
                ]

            ids = await start(range(traces))
            await _each_took(steps_log, ids, lead_steps)
            unfinished = [t for t in ids if not (await trace_state(store, t)).is_final]
            out.mid_run = out.row.affected = len(unfinished)
            out.primary_before = len(primary.requests)
            out.load = (os.getloadavg()[0], 0.0)
            primary.outage = DOWN
            down_at = time.monotonic()
            if late:
                await _circuit_opened(conn, outage_s)
                ids += await start(range(traces, traces + late))
                out.late = late
            # the fault itself: the provider stays down this long
            await asyncio.sleep(max(0.0, outage_s - (time.monotonic() - down_at)))
            await _until_moved(store, unfinished + ids[traces:])
            primary.outage = None
            out.outage_s = time.monotonic() - down_at
            during = len(primary.requests)
            out.primary_during = primary.outage_requests
            await _wait_final(store, ids, [])
            out.primary_after = len(primary.requests) - during
            out.fallback_requests = len(fallback.requests)
            no_checks = root / "verify.log"  # these traces run no verification command
            no_checks.touch()
            await _check(out.row, store, ids, [], steps_log, no_checks)
            dead = Counter(_trace_of(r.json) for r in primary.requests[out.primary_before : during])
            out.most_dead_calls = max((dead[n] for n in range(traces)), default=0)
            out.late_dead_calls = sum(dead[n] for n in range(traces, traces + late))
            served = Counter(_trace_of(r.json) for r in fallback.requests)
            await _check_switches(out, store, ids, served)
            for rider in riders:
                out.problems += await rider.check(store)
            out.load = (out.load[0], os.getloadavg()[0])
        except (TimeoutError, nats.errors.Error) as exc:
            out.problems.append(f"the run did not finish: {type(exc).__name__}: {exc}")
        finally:
            await stack.aclose()
            with contextlib.suppress(TimeoutError, nats.errors.Error):
                await conn.close()
            await up.stop()
    return out


async def _each_took(steps_log: Path, ids: list[str], count: int, timeout_s: float = 90.0) -> None:
    """Return once every trace has started ``count`` tool steps (all are under way)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        lines = (await asyncio.to_thread(steps_log.read_text)).splitlines()
        taken = Counter(run["trace"] for run in map(json.loads, lines) if run["phase"] == "start")
        if all(taken[t] >= count for t in ids):
            return
        await asyncio.sleep(0.05)
    raise TimeoutError(f"not every trace took {count} steps within {timeout_s:.0f} s")


async def _circuit_opened(conn: Connection, timeout_s: float) -> None:
    """Return once the primary's circuit is open (every executor skips it)."""
    kv = await conn.kv(conn.names.circuits)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        with contextlib.suppress(nats.js.errors.KeyNotFoundError):
            if decode((await kv.get(provider_of(PRIMARY))).value).opened_at is not None:
                return
        await asyncio.sleep(0.2)
    raise TimeoutError(f"the primary's circuit did not open within {timeout_s:.0f} s")


async def _until_moved(store: EventStore, ids: list[str], timeout_s: float = 60.0) -> None:
    """Return once each trace is on the fallback or final (or after ``timeout_s``: the checks
    then count the trace that never met the outage as not switched)."""
    deadline = time.monotonic() + timeout_s
    pending = set(ids)
    while pending and time.monotonic() < deadline:
        for trace_id in list(pending):
            state = await trace_state(store, trace_id)
            if state.model == FALLBACK or state.is_final:
                pending.discard(trace_id)
        await asyncio.sleep(0.2)


async def _check_switches(
    out: OutageRow, store: EventStore, ids: list[str], served: Counter[int]
) -> None:
    """Each trace's switches from its log; ``served``: fallback requests per trace number."""
    for n, trace_id in enumerate(ids):
        switches = [
            r.event
            async for r in store.replay("trace", trace_id)
            if isinstance(r.event, ev.ModelSwitched)
        ]
        state = await trace_state(store, trace_id)
        out.switched += bool(switches)
        out.reasons.update(s.reason for s in switches)
        out.on_fallback += state.model == FALLBACK and state.status == "completed"
        if served[n] and not switches:
            out.unlogged += 1
        if any((s.from_model, s.to) != (PRIMARY, FALLBACK) for s in switches):
            out.problems.append(f"{trace_id}: switches {[(s.from_model, s.to) for s in switches]}")


def _trace_of(body: dict[str, object]) -> int:
    """Which trace a request speaks for: ``outage trace <n>`` opens its first message."""
    text = json.dumps(body.get("messages"))
    found = text.partition("outage trace ")[2]
    digits = found[: len(found) - len(found.lstrip("0123456789"))]
    return int(digits) if digits else -1
