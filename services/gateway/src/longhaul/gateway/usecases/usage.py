"""Spend you can read and budget waits you can answer.

``usage``: what keys spent, from the ``lh_spend`` bucket (every key's spend per UTC day, by
model and preset, ``longhaul.domain.spend``), summed over the dimensions asked for. A key
reads its own; the operator every key's.

``budget_waits``: the runs waiting at a limit, from the index mirror (the operator's view
across keys; a key sees its own, as in its inbox).

``answer_budget``: the answer to a run's ``budget`` wait (a key's day or month limit, or the
run's own cap with ``on_limit: ask``): a raise for that run or a stop. The operator may
answer any run; a key its own runs only where ``spend_limits.keys_answer`` allows it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from longhaul.core import spend as spend_store
from longhaul.domain import events as ev
from longhaul.domain.spend import ROW_SEPARATOR
from longhaul.domain.state import TraceState
from longhaul.domain.state.errors import InvalidTransition
from longhaul.gateway import access, commands
from longhaul.gateway.auth import Principal
from longhaul.gateway.errors import ApiError, not_found
from longhaul.gateway.runtime import Runtime

Group = Literal["key", "model", "preset", "day"]
GROUPS: tuple[Group, ...] = ("key", "model", "preset", "day")
GROUP_BY_PATTERN = r"^ *((key|model|preset|day) *(, *(key|model|preset|day) *)*)?$"
"""What ``group_by`` may be (the API documents it; :func:`parse_groups` reads it)."""
DAY_PATTERN = r"^[0-9]{4}-[0-9]{2}-[0-9]{2}$"
"""``since``: compared as text with the entries' days, so any such string is a bound."""


@dataclass(frozen=True)
class Caller:
    """Who reads or answers: a key (``owner``) or the operator (``admin``: every key)."""

    owner: str
    admin: bool = False


@dataclass
class UsageRow:
    key: str | None
    model: str | None
    preset: str | None
    day: str | None
    tokens: int = 0
    usd: float = 0.0
    calls: int = 0


@dataclass
class BudgetWait:
    trace_id: str
    key: str | None
    name: str | None
    since: float
    detail: str


def budget_waits(runtime: Runtime, caller: Caller) -> list[BudgetWait]:
    """Every run waiting at a spend limit the caller may see, oldest first."""
    mirror = runtime.mirror
    if not mirror.ready.is_set():
        raise ApiError(503, "unavailable", "trace index is still loading")
    waits: list[BudgetWait] = []
    for trace_id in list(mirror.waiting_on_people):
        entry = mirror.entries[trace_id]
        owner = mirror.owner_of(entry)
        if entry.wait_reason != "budget" or entry.person_wait is None:
            continue
        if caller.admin or owner == caller.owner:
            wait = entry.person_wait
            waits.append(BudgetWait(trace_id, owner, entry.name, wait.since, wait.question))
    return sorted(waits, key=lambda w: (w.since, w.trace_id))


def parse_groups(group_by: str) -> list[Group]:
    """``key,model`` (matching :data:`GROUP_BY_PATTERN`) → the groups named, each once."""
    names = {name.strip() for name in group_by.split(",")}
    return [g for g in GROUPS if g in names]


async def usage(
    runtime: Runtime, caller: Caller, groups: Sequence[Group], since: str | None
) -> list[UsageRow]:
    """What was spent from ``since`` on, one row per value of ``groups`` (all summed with
    none), most expensive first."""
    owner = None if caller.admin else caller.owner
    async with runtime.nats_call():
        days = await spend_store.entries(runtime.service.conn, owner, since)
    rows: dict[tuple[str | None, ...], UsageRow] = {}
    for key_id, day, entry in days:
        for label, spent in entry.rows.items():
            model, _, preset = label.partition(ROW_SEPARATOR)
            values = {"key": key_id, "model": model, "preset": preset, "day": day}
            picked = tuple(values[g] if g in groups else None for g in GROUPS)
            row = rows.get(picked)
            if row is None:
                row = rows[picked] = UsageRow(
                    key=picked[0], model=picked[1], preset=picked[2], day=picked[3]
                )
            row.tokens += spent.tokens
            row.usd += spent.usd
            row.calls += spent.calls
    return sorted(rows.values(), key=lambda r: (-r.usd, -r.tokens, str(r.day), str(r.key)))


async def answer_budget(
    runtime: Runtime,
    caller: Caller,
    trace_id: str,
    action: Literal["raise", "stop"],
    *,
    usd: float = 0.0,
    tokens: int = 0,
) -> TraceState:
    """Append ``budget_answered`` to a trace waiting on a budget (409 if it is not)."""
    if caller.admin:
        access.checked_id("trace", trace_id)
        async with runtime.nats_call():
            state = await runtime.traces.load(trace_id)
        if not state.exists:
            raise not_found("trace", trace_id)
    else:
        state = await access.owned_trace(runtime, Principal(caller.owner), trace_id)
    event = ev.BudgetAnswered(
        action=action,
        usd=usd if action == "raise" else 0.0,
        tokens=tokens if action == "raise" else 0,
        by="admin" if caller.admin else caller.owner,
    )
    try:  # a run with nothing to answer is a 409 before anyone's right to answer is asked
        state.check(event)
    except InvalidTransition as exc:
        raise ApiError.from_transition(exc) from exc
    if not caller.admin and not runtime.config.spend_limits.keys_answer:
        raise ApiError(
            403,
            "forbidden",
            "only the operator (gateway.admin_keys) answers budget waits here "
            "(spend_limits.keys_answer is off)",
        )
    after, _ = await commands.append_checked(runtime, state, lambda _: event)
    return after
