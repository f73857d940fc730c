"""The key's spend in ``lh_spend`` (``longhaul.core.spend``) against a real nats-server: two
ledgers stand for two executors (separate process memory), the day is an injected clock.

A trace counted again — by its executor after a crash, or by another executor that took it
over — adds nothing twice; runs of one key counting at once each add their calls exactly; a
key at its limit is told what it spent, and a raise for the run lifts it."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

from longhaul.core.connection import Connection
from longhaul.core.spend import SpendLedger, entries
from longhaul.domain import events as ev
from longhaul.domain.config import SpendLimitsConfig
from longhaul.domain.state import TraceState

NOON = datetime(2026, 11, 28, 12, tzinfo=UTC).timestamp()
LIMITS = SpendLimitsConfig.model_validate({"keys": {"k_a": {"day": {"usd": 1.0}}}})


def clock() -> float:
    return NOON


def trace(trace_id: str, calls: int, owner: str = "k_a") -> TraceState:
    state = TraceState()
    state.apply(ev.TraceCreated(messages=[], owner=owner, aggregate_id=trace_id))
    state.trace_id = trace_id
    for n in range(1, calls + 1):
        state.apply(
            ev.MessageAppended(
                sequence=n,
                parent_sequence=n - 1 if n > 1 else None,
                role="assistant",
                content="x",
                usage=ev.Usage(prompt_tokens=90, completion_tokens=10),
                cost=0.125,
                model="openai:gpt-4o",
                ts=NOON,
            )
        )
    return state


async def spent(conn: Connection, owner: str) -> tuple[int, float, int]:
    [(_, day, entry)] = await entries(conn, owner, None)
    assert day == "2026-11-28"
    total = entry.total()
    return total.tokens, total.usd, total.calls


async def test_a_trace_counted_again_anywhere_is_counted_once(conn: Connection) -> None:
    first, second = SpendLedger(conn, LIMITS, clock=clock), SpendLedger(conn, LIMITS, clock=clock)
    state = trace("t_once", 3)
    await first.count(state)
    await second.count(state)  # another executor (no memory of the first's count)
    await first.count(state)  # the first again, after its turn ended
    assert await spent(conn, "k_a") == (300, 0.375, 3)
    state = trace("t_once", 5)  # two more calls, counted by whichever runs it
    await second.count(state)
    await first.count(state)
    assert await spent(conn, "k_a") == (500, 0.625, 5)


async def test_runs_of_one_key_counting_at_once_are_each_added(conn: Connection) -> None:
    ledgers = [SpendLedger(conn, SpendLimitsConfig(), clock=clock) for _ in range(4)]
    states = [trace(f"t_run{n}", 3, owner="k_b") for n in range(8)]
    await asyncio.gather(*(ledgers[n % 4].count(s) for n, s in enumerate(states)))
    assert await spent(conn, "k_b") == (2400, 3.0, 24)


async def test_a_key_at_its_limit_is_told_what_it_spent_and_a_raise_lifts_it(
    conn: Connection,
) -> None:
    ledger = SpendLedger(conn, LIMITS, clock=clock)
    assert await ledger.reached(trace("t_under", 7)) is None  # $0.875 of $1
    other = SpendLedger(conn, LIMITS, clock=clock)  # another executor, another run of k_a
    told = await other.reached(trace("t_over", 1))
    assert told == "the key's day limit (UTC) is reached: $1.0000 spent of $1.0"
    raised = trace("t_over", 1)
    raised.usage.raise_by(0, 0.5)
    assert await other.reached(raised) is None
    assert await SpendLedger(conn, LIMITS, clock=clock).reached(trace("t_c", 0, "k_c")) is None


async def test_many_runs_of_one_key_on_one_executor_counting_at_once_are_each_added(
    conn: Connection,
) -> None:
    """Hundreds of traces of one key ending their turns together on one executor: each count
    gets through (none gives up as "kept changing") and each is added once."""
    ledger = SpendLedger(conn, SpendLimitsConfig(), clock=clock)
    states = [trace(f"t_many{n}", 2, owner="k_many") for n in range(200)]
    await asyncio.gather(*(ledger.count(s) for s in states))
    assert await spent(conn, "k_many") == (40_000, 50.0, 400)


async def test_a_key_without_limits_is_counted_when_its_turn_ends_not_as_it_starts(
    conn: Connection,
) -> None:
    """A turn's first model call of a key without limits pays no KV round trip (what earlier
    turns spent was counted when they ended); the turn's end counts all of it."""
    now = [0.0]
    ledger = SpendLedger(conn, SpendLimitsConfig(), clock=clock, monotonic=lambda: now[0])
    state = trace("t_free", 3, owner="k_free")  # calls a crashed turn left uncounted
    assert await ledger.reached(state) is None
    assert await entries(conn, "k_free", None) == []
    now[0] = 10.0  # a long turn: counted every UNLIMITED_COUNT_EVERY_S
    assert await ledger.reached(state) is None
    assert await spent(conn, "k_free") == (300, 0.375, 3)
    await ledger.count(trace("t_free", 4, owner="k_free"))  # the turn ends
    assert await spent(conn, "k_free") == (400, 0.5, 4)
