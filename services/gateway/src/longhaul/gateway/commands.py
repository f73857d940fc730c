"""The write path: fold, check, append with optimistic concurrency, retry on conflict.

A request is accepted only once its event is durably on the log, and only if the fold says it
can apply: the event is checked against the freshly folded state and appended with
``expected`` = that state's position. If another writer (an executor finishing a step) got
there first, the store raises :class:`ConcurrencyError` and the decision is re-made from a
fresh fold; the retry count is small because the window is one round trip.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Awaitable, Callable
from typing import Protocol, TypeVar

import msgspec
from longhaul.core import events as ev
from longhaul.core.events import Aggregate
from longhaul.core.ids import new_id
from longhaul.core.index import TraceIndexEntry
from longhaul.core.state import InvalidTransition, TaskState, TraceState
from longhaul.core.store import ConcurrencyError, Position, Recorded
from longhaul.gateway import access
from longhaul.gateway.auth import Principal
from longhaul.gateway.errors import ApiError
from longhaul.gateway.runtime import Runtime

log = logging.getLogger(__name__)

APPEND_ATTEMPTS = 5
ACTOR = "gateway"


def _encodable(event: ev.Event) -> None:
    """Refuse text JSON cannot carry as UTF-8 (lone surrogates such as ``"\\ud800"``)
    before it reaches the store."""
    try:
        ev.encode(event)
    except (UnicodeEncodeError, msgspec.EncodeError) as exc:
        raise ApiError(
            422, "invalid_text", "request contains text that is not valid Unicode"
        ) from exc


async def _backoff(runtime: Runtime, attempt: int) -> None:
    """Lost a race: wait a random few milliseconds (growing) so racing writers spread out
    instead of colliding again on the next round trip."""
    runtime.metrics.conflicts.inc()
    await asyncio.sleep(random.uniform(0, 0.005 * (attempt + 1)))


def _conflict_exhausted(kind: str, identifier: str) -> ApiError:
    return ApiError(
        409, "concurrent_update",
        f"{kind} {identifier} kept changing while this request was applied; retry",
        headers={"Retry-After": "1"},
    )


class _Folded(Protocol):
    """What the write path needs of a fold (:class:`TraceState`, :class:`TaskState`)."""

    version: int
    stream_seq: int

    def apply(self, event: ev.Event, stream_seq: int = 0) -> None: ...


_S = TypeVar("_S", bound=_Folded)


async def _append_first(
    runtime: Runtime, aggregate: Aggregate, aggregate_id: str, event: ev.Event, state: _S
) -> _S:
    """Append the creation event of a new aggregate; returns ``state`` with it applied."""
    _encodable(event)
    async with runtime.nats_call():
        [recorded] = await runtime.store.append(
            aggregate, aggregate_id, [event], expected=Position(), actor=ACTOR
        )
    state.apply(recorded.event, recorded.seq)
    runtime.metrics.appended.labels(event.type).inc()
    return state


async def _append_checked(
    runtime: Runtime,
    aggregate: Aggregate,
    aggregate_id: str,
    load: Callable[[], Awaitable[_S]],
    build: Callable[[_S], ev.Event],
    check: Callable[[_S, ev.Event], None],
) -> tuple[_S, Recorded]:
    """Fold, build the event, check it against the fold and append it at the fold's
    position; a lost race re-folds and decides again. Returns the state after the event."""
    for attempt in range(APPEND_ATTEMPTS):
        state = await load()
        event = build(state)
        try:
            check(state, event)
        except InvalidTransition as exc:
            raise ApiError.from_transition(exc) from exc
        _encodable(event)
        try:
            async with runtime.nats_call():
                [recorded] = await runtime.store.append(
                    aggregate, aggregate_id, [event],
                    expected=Position(state.stream_seq, state.version), actor=ACTOR,
                )
        except ConcurrencyError:
            await _backoff(runtime, attempt)
            continue
        state.apply(recorded.event, recorded.seq)
        runtime.metrics.appended.labels(event.type).inc()
        return state, recorded
    raise _conflict_exhausted(aggregate, aggregate_id)


async def create_trace(
    runtime: Runtime, principal: Principal, event: ev.TraceCreated
) -> TraceState:
    trace_id = new_id("t")
    event = msgspec.structs.replace(event, owner=principal.owner)
    state = await _append_first(runtime, "trace", trace_id, event, TraceState())
    runtime.view.put(TraceIndexEntry.from_state(state))
    runtime.service.spawn(_write_index(runtime, state), name=f"index-{trace_id}")
    return state


async def _write_index(runtime: Runtime, state: TraceState) -> None:
    """Index the new trace after answering: the 202 promises the event is on the log, and
    the listing already sees it through the mirror, so the KV write need not delay it."""
    try:
        async with runtime.nats_call():
            await runtime.traces.update(state)
    except ApiError:
        # The executor's own index update (on its first turn) repairs the entry.
        log.warning("trace %s created but its index entry was not written", state.trace_id)


async def append_to_trace(
    runtime: Runtime,
    principal: Principal,
    trace_id: str,
    build: Callable[[TraceState], ev.TraceEvent],
) -> tuple[TraceState, Recorded]:
    """Append ``build(state)`` to a trace the caller owns; returns the state after it."""
    return await _append_checked(
        runtime, "trace", trace_id,
        lambda: access.load_trace(runtime, principal, trace_id), build, TraceState.check,
    )


async def create_task(runtime: Runtime, principal: Principal, event: ev.TaskCreated) -> TaskState:
    event = msgspec.structs.replace(event, owner=principal.owner)
    return await _append_first(runtime, "task", new_id("task"), event, TaskState())


def _check_task(state: TaskState, event: ev.Event) -> None:
    """TaskState has no ``check``: probe a deep copy, as TraceState.check does."""
    probe = msgspec.convert(msgspec.to_builtins(state), TaskState)
    probe.apply(event)


async def append_to_task(
    runtime: Runtime, principal: Principal, task_id: str, event: ev.TaskEvent
) -> tuple[TaskState, Recorded]:
    """Append ``event`` to a task the caller owns; returns the state after it."""
    return await _append_checked(
        runtime, "task", task_id,
        lambda: access.load_task(runtime, principal, task_id), lambda _: event, _check_task,
    )
