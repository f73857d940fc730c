"""``kill-at-effect``: executors killed -9 while payments are in flight, many times; the
payment service must end with exactly one effect per logical call.

``longhaul up --executors 2`` loads ``examples/tools/payments.py``. Each trace charges,
refunds and pays out once (a scripted model), against :class:`PaymentService` on loopback,
which answers slowly. The driver waits for a request of each kind in turn to be in flight,
kills the executor acting for it, and waits for ``longhaul up`` to respawn it. A person
(this driver, through the API) answers every call whose outcome is unknown after checking the
service, as an operator would: it took effect, or run it again.

Reported: traces finished, kills (and how many landed on an in-flight request), effects
applied twice or never, calls unpaired or answered "interrupted", and how each cut-off call was
resumed (re-run with its key, reconciled, decided by a person).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import random
import signal
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from longhaul.client import AsyncClient, LonghaulError, Trace
from longhaul.core.connection import connect
from longhaul.core.store import EventStore
from longhaul.domain.state import TraceState

from tests.chaos.up import Up, admin_config
from tests.integration.executor.scripts import write_script
from tests.support.counting_server import serving
from tests.support.env import SCRIPTED_DIR_VAR, service_env
from tests.support.folds import trace_state
from tests.support.payment_service import PaymentService

TOKEN = "payments-token-51c2"
KIND_OF_TOOL = {"charge": "charges", "refund": "refunds", "payout": "payouts"}
ROTATION = ("charges", "refunds", "payouts")
IN_FLIGHT_WAIT_S = 30.0
RESPAWN_WAIT_S = 60.0
FINISH_WAIT_S = 180.0


@dataclass
class EffectRow:
    traces: int = 0
    finished: int = 0
    kills: int = 0
    in_flight_kills: int = 0
    calls: int = 0
    twice: int = 0
    never: int = 0
    unpaired: int = 0
    not_started: int = 0
    """Calls a kill caught before they acted: answered "interrupted", never applied."""
    interrupted: int = 0
    """Calls that acted and were still answered "interrupted" (a violation)."""
    resolutions: Counter[str] = field(default_factory=Counter)
    decisions: Counter[str] = field(default_factory=Counter)
    notes: list[str] = field(default_factory=list)

    @property
    def clean(self) -> bool:
        return self.finished == self.traces and not (
            self.twice or self.never or self.unpaired or self.interrupted
        )


def render_effects(row: EffectRow, title: str) -> str:
    resumed = ", ".join(f"{k} {v}" for k, v in sorted(row.resolutions.items())) or "-"
    decided = ", ".join(f"{k} {v}" for k, v in sorted(row.decisions.items())) or "-"
    lines = [
        f"### {title}",
        "",
        "| traces | finished | kills (in flight) | effect calls | applied twice | never applied "
        "| unpaired | acted, answered interrupted | caught before acting | resumed "
        "| a person decided |",
        "|" + " --- |" * 11,
        f"| {row.traces} | {row.finished} | {row.kills} ({row.in_flight_kills}) | {row.calls} "
        f"| {row.twice} | {row.never} | {row.unpaired} | {row.interrupted} | {row.not_started} "
        f"| {resumed} | {decided} |",
    ]
    return "\n".join(lines + [f"- {note}" for note in row.notes[:8]])


def _script(root: Path, n: int, rounds: int) -> str:
    """``rounds`` times a charge, a refund and a payout, one call per turn, then an answer."""
    calls = [
        call
        for r in range(rounds)
        for call in (
            ("charge", {"amount": 100 * (r + 1) + n, "customer": f"cus_{n}"}),
            ("refund", {"amount": 10 * (r + 1) + n, "customer": f"cus_{n}"}),
            ("payout", {"amount": 50 * (r + 1) + n, "account": f"acct_{n}"}),
        )
    ]
    turns: list[dict[str, object]] = [
        {"tool_calls": [{"name": name, "arguments": arguments}]} for name, arguments in calls
    ]
    return write_script(root / f"pay{n}.yaml", [*turns, {"content": "paid"}])


async def run_kill_at_effect(
    root: Path, *, traces: int, rounds: int, kills: int, seed: int, answer_after_s: float = 0.6
) -> EffectRow:
    rng = random.Random(seed)
    row = EffectRow(traces=traces)
    service = PaymentService(TOKEN, answer_after_s)
    grant = {"url": "PAYMENTS_URL", "token": "PAYMENTS_TOKEN"}
    with serving(service.handler()) as url:
        up = Up(
            root,
            {
                **service_env(),
                SCRIPTED_DIR_VAR: str(root),
                "LONGHAUL_EXECUTOR__TOOL_MODULES": "examples.tools.payments",
                "LONGHAUL_TOOLS__SECRETS": json.dumps({tool: grant for tool in KIND_OF_TOOL}),
                "LONGHAUL_STORE__LEASE_TTL_S": "2",
                "PAYMENTS_URL": url,
                "PAYMENTS_TOKEN": TOKEN,
                "PYTHONUNBUFFERED": "1",
            },
        )
        state = await up.start()
        conn = await connect(admin_config(state))
        store = EventStore(conn)
        try:
            async with AsyncClient(state["gateway"], timeout=30) as client:
                ids = []
                for n in range(traces):
                    model = _script(root, n, rounds)
                    created = await client.create_trace(
                        f"payments {n}", model=model, max_iterations=3 * rounds + 1
                    )
                    ids.append(created.trace_id)
                person = asyncio.create_task(_person(client, service, ids, row))
                try:
                    for n in range(kills):
                        if not await _strike(up, store, service, ROTATION[n % 3], row, rng):
                            break
                    await _wait_final(store, ids)
                finally:
                    person.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await person
                for trace_id in ids:
                    final = await trace_state(store, trace_id)
                    _check(row, final)
                    _check_calls(row, final, service)
        finally:
            with contextlib.suppress(Exception):
                await conn.close()
            await up.stop()
    return row


async def _strike(
    up: Up,
    store: EventStore,
    service: PaymentService,
    kind: str,
    row: EffectRow,
    rng: random.Random,
) -> bool:
    """Kill the executor acting for an in-flight request of ``kind`` (or of any kind when none
    of that kind comes); False when nothing is left in flight to strike. The service holds
    the requests of the kind struck at until the kill has landed: finding the executor reads
    the trace's log, which a loaded box can stretch past the request's own slow answer."""
    started = time.monotonic()
    keys: list[str] = []
    service.hold(kind)
    try:
        while (waited := time.monotonic() - started) < IN_FLIGHT_WAIT_S:  # ask the service
            keys = service.held_of(kind)
            if not keys and waited > IN_FLIGHT_WAIT_S / 2:  # that kind is over: take any
                service.hold(*ROTATION)
                keys = [key for other in ROTATION for key in service.held_of(other)]
            if keys:
                break
            await asyncio.sleep(0.01)
        if not keys:
            row.notes.append(f"nothing in flight to strike after {IN_FLIGHT_WAIT_S:.0f} s")
            return False
        key = rng.choice(keys)
        target = await _acting_executor(store, key.split(":", 1)[0])
        pid = up.pid_of(target)
        if pid is None:
            row.notes.append(f"no pid for {target}")
            return False
        os.kill(pid, signal.SIGKILL)
        row.kills += 1
        row.in_flight_kills += service.is_in_flight(key)  # the service still works on it
    finally:
        service.release()
    deadline = time.monotonic() + RESPAWN_WAIT_S
    while time.monotonic() < deadline:  # up.json is the only record of a restart
        if up.pid_of(target) not in (None, pid):
            return True
        await asyncio.sleep(0.05)
    row.notes.append(f"{target} was not restarted within {RESPAWN_WAIT_S:.0f} s")
    return False


async def _acting_executor(store: EventStore, trace_id: str) -> str:
    """The ``longhaul up`` child that wrote the trace's latest executor event (the ledger's
    ``effect_started`` came just before the request)."""
    actor = ""
    async for recorded in store.replay("trace", trace_id):
        if recorded.event.actor.startswith("executor:exec-"):
            actor = recorded.event.actor
    return "executor-" + actor.removeprefix("executor:exec-")


async def _person(
    client: AsyncClient, service: PaymentService, ids: list[str], row: EffectRow
) -> None:
    """An operator answering calls whose outcome is unknown, after checking the service. It
    lists what waits (one request, within the gateway's rate limit) and opens only those."""
    ours = set(ids)
    while True:
        with contextlib.suppress(LonghaulError):  # the gateway may be busy; ask again
            waiting = await client.list_traces(status="waiting")
            for summary in waiting.traces:
                if summary.trace_id not in ours:
                    continue
                trace = await client.get_trace(summary.trace_id)
                for pending in trace.pending_approvals:
                    if pending.outcome_unknown:
                        await _decide(client, service, trace, pending.tool_call_id, row)
        await asyncio.sleep(0.5)


async def _decide(
    client: AsyncClient, service: PaymentService, trace: Trace, call_id: str, row: EffectRow
) -> None:
    [effect] = [e for e in trace.cut_off_effects if e.tool_call_id == call_id]
    done = service.applied_for(KIND_OF_TOOL[effect.tool], effect.idempotency_key)
    if done:
        reason = f"{effect.tool} {done[0]['id']}: {done[0]['amount']} cents"
        await client.approve(
            trace.trace_id, call_id, approved=False, took_effect=True, reason=reason
        )
        row.decisions["took_effect"] += 1
    else:
        await client.approve(trace.trace_id, call_id, approved=True)
        row.decisions["run_again"] += 1


async def _wait_final(store: EventStore, ids: list[str]) -> None:
    deadline = time.monotonic() + FINISH_WAIT_S
    pending = set(ids)
    while pending and time.monotonic() < deadline:
        for trace_id in list(pending):
            if (await trace_state(store, trace_id)).is_final:
                pending.discard(trace_id)
        await asyncio.sleep(0.3)


def _check(row: EffectRow, state: TraceState) -> None:
    if state.status == "completed":
        row.finished += 1
    else:
        why = state.wait_reason or state.error or ""
        row.notes.append(f"{state.trace_id}: {state.status} {why}")
    for effect in state.ledger.effects.values():
        row.resolutions.update(r.resolution for r in effect.resumed)


def _check_calls(row: EffectRow, state: TraceState, service: PaymentService) -> None:
    """Every call on the path answered once, and applied once at the service (by its key). A
    call the crash caught before its ``effect_started`` was appended never acted: it is
    answered "interrupted" (the model may call it again, with a new key) and must not have
    been applied; an "interrupted" answer for a call that started acting is a violation."""
    trace_id = state.trace_id
    answers = Counter(m.tool_call_id for m in state.messages.values() if m.role == "tool")
    codes = {m.tool_call_id: m.error_code for m in state.messages.values() if m.role == "tool"}
    for message in state.main_path():
        for call in message.tool_calls or []:
            row.calls += 1
            if answers[call.id] != 1:
                row.unpaired += 1
                row.notes.append(f"{trace_id} {call.id}: answered {answers[call.id]} times")
            key = f"{trace_id}:{call.id}"
            applied = len(service.applied_for(KIND_OF_TOOL[call.function.name], key))
            row.twice += applied > 1
            if codes.get(call.id) == "interrupted":
                row.not_started += 1
                if call.id in state.ledger or applied:
                    row.interrupted += 1
                    row.notes.append(f"{trace_id} {call.id}: acted, yet answered interrupted")
                continue
            row.never += applied == 0
            if applied != 1:
                row.notes.append(f"{trace_id} {call.function.name} {call.id}: applied {applied}x")
