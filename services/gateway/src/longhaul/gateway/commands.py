"""The gateway's writes: each request becomes one event appended through the repository.

A request is accepted only once its event is durably on the log, and only if the fold says it
can apply: :meth:`Repository.save` checks the event against the freshly folded state and
appends it at that state's position. If another writer (an executor finishing a step) got
there first, the state is caught up and the request decided again; a conflict that outlasts
the retry policy is a 409 the client may retry.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
from collections.abc import AsyncIterator, Callable
from typing import Any

import msgspec
from longhaul.core.index import TraceIndexEntry
from longhaul.core.repository import ConcurrencyError, Recorded, Repository, S
from longhaul.domain import events as ev
from longhaul.domain.events import Aggregate
from longhaul.domain.ids import new_id
from longhaul.domain.state import InvalidTransition, TaskState, TraceState
from longhaul.gateway import access
from longhaul.gateway.auth import Principal
from longhaul.gateway.errors import ApiError
from longhaul.gateway.runtime import Runtime
from longhaul.gateway.storage import require_room

log = logging.getLogger(__name__)

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


def _conflict_exhausted(kind: str, identifier: str) -> ApiError:
    return ApiError(
        409,
        "concurrent_update",
        f"{kind} {identifier} kept changing while this request was applied; retry",
        headers={"Retry-After": "1"},
    )


def _repository(runtime: Runtime, aggregate: Aggregate) -> Repository[Any]:
    return runtime.traces if aggregate == "trace" else runtime.tasks


async def _append_first(
    runtime: Runtime, aggregate: Aggregate, aggregate_id: str, event: ev.Event
) -> Any:
    """Append the creation event of a new aggregate; returns its fold."""
    _encodable(event)
    async with runtime.nats_call():
        state = await _repository(runtime, aggregate).create(aggregate_id, event, actor=ACTOR)
    if state is None:  # a fresh random id is never taken; if it were, the client retries
        raise _conflict_exhausted(aggregate, aggregate_id)
    runtime.metrics.appended.labels(event.type).inc()
    return state


async def _append_checked(
    runtime: Runtime,
    aggregate: Aggregate,
    aggregate_id: str,
    state: S,
    build: Callable[[S], ev.Event],
) -> tuple[S, Recorded]:
    """Build the event from the fold and save it (checked, at the fold's position, re-built
    on a lost race). Returns the state after the event."""

    def decide(current: S) -> list[ev.Event]:
        event = build(current)
        try:
            current.check(event)
        except InvalidTransition as exc:
            raise ApiError.from_transition(exc) from exc
        _encodable(event)
        return [event]

    def conflicted(_: S) -> None:
        runtime.metrics.conflicts.inc()

    try:
        async with runtime.nats_call():
            [recorded] = await _repository(runtime, aggregate).save(
                aggregate_id, state, decide, actor=ACTOR, on_conflict=conflicted
            )
    except ConcurrencyError as exc:
        raise _conflict_exhausted(aggregate, aggregate_id) from exc
    runtime.metrics.appended.labels(recorded.event.type).inc()
    return state, recorded


def keyed_trace_id(owner: str, idempotency_key: str) -> str:
    """The trace an ``Idempotency-Key`` names. Derived from the key and the caller's owner,
    so the log itself remembers the key (durable, nothing else to store or expire) and two
    API keys using the same key never meet."""
    digest = hashlib.sha256(f"{owner}\0{idempotency_key}".encode()).hexdigest()
    return f"t_k{digest[:32]}"


class KeyedTraceDeleted(ApiError):
    """The trace an ``Idempotency-Key`` (or A2A ``messageId``) names was deleted."""


async def keyed_creation(runtime: Runtime, principal: Principal, trace_id: str) -> int | None:
    """The stream sequence of the keyed trace's creation, if an earlier request made it.
    One whose trace was deleted is refused for good (409, no ``Retry-After``) while the
    delete's tombstone lasts: the stream would still take the repeat for a duplicate of the
    erased creation, and a client that retries its id must learn the trace is gone, not
    start it again behind the delete."""
    async with runtime.nats_call():
        stored = await access.first_stored(runtime, "trace", trace_id)
        if stored is None and await runtime.index.buried(trace_id):
            raise KeyedTraceDeleted(
                409,
                "idempotency_conflict",
                f"the trace this key started ({trace_id}) was deleted; "
                "send the request again under a new key",
            )
    if stored is None:
        return None
    if not (
        isinstance(stored, Recorded)
        and isinstance(stored.event, ev.TraceCreated)
        and stored.event.owner == principal.owner
    ):
        # only a sha-256 collision (or a corrupt log) gets here
        raise ApiError(409, "idempotency_conflict", "that Idempotency-Key cannot be used")
    return stored.seq


async def create_trace(
    runtime: Runtime, principal: Principal, event: ev.TraceCreated, trace_id: str | None = None
) -> TraceState:
    """Start a trace (``trace_id``: a keyed one; two first requests racing on it, the
    loser's create conflicts, 409 with Retry-After, and its retry finds the winner's)."""
    trace_id = trace_id or new_id("t")
    event = msgspec.structs.replace(event, owner=principal.owner)
    async with _starting(runtime, principal):
        state: TraceState = await _append_first(runtime, "trace", trace_id, event)
        runtime.mirror.put(TraceIndexEntry.from_state(state))
    runtime.service.spawn(_write_index(runtime, state), name=f"index-{trace_id}")
    return state


async def _write_index(runtime: Runtime, state: TraceState) -> None:
    """Index the new trace after answering: the 202 promises the event is on the log, and
    the listing already sees it through the mirror, so the KV write need not delay it."""
    try:
        async with runtime.nats_call():
            await runtime.index.update(state)
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
    state = await access.owned_trace(runtime, principal, trace_id)
    if not state.is_final:
        return await _append_checked(runtime, "trace", trace_id, state, build)
    # A request on an ended trace starts a new run: it counts against the key's cap.
    async with _starting(runtime, principal):
        state, recorded = await _append_checked(runtime, "trace", trace_id, state, build)
        runtime.mirror.put(TraceIndexEntry.from_state(state))
    return state, recorded


async def append_checked(
    runtime: Runtime, state: TraceState, build: Callable[[TraceState], ev.TraceEvent]
) -> tuple[TraceState, Recorded]:
    """Append ``build(state)`` to a trace already checked to be the caller's (or any, for the
    operator); a running or waiting one only (an ended one's fold refuses it)."""
    return await _append_checked(runtime, "trace", state.trace_id, state, build)


async def stop_for_erasure(runtime: Runtime, state: TraceState, reason: str = "deleted") -> None:
    """Ask a trace (already checked to be the caller's) to stop before it is erased, or
    because its key was revoked; one that ended meanwhile needs nothing."""
    if state.is_final or state.stop_requested:
        return
    try:
        await _append_checked(
            runtime, "trace", state.trace_id, state, lambda _: ev.StopRequested(reason=reason)
        )
    except ApiError as exc:
        if exc.status != 409:
            raise


def _starting(
    runtime: Runtime, principal: Principal, task_id: str | None = None
) -> contextlib.AbstractAsyncContextManager[None]:
    """Room in the stores (else 507), then the key's active-run cap around a start
    (``quota``: tasks count as runs too)."""

    async def task_active(task_id: str) -> bool:
        async with runtime.nats_call():
            return not (await runtime.tasks.load(task_id)).is_final

    @contextlib.asynccontextmanager
    async def with_room() -> AsyncIterator[None]:
        await require_room(runtime)
        async with runtime.quota.starting(runtime.mirror, principal.owner, task_active, task_id):
            yield

    return with_room()


async def create_task(
    runtime: Runtime, principal: Principal, event: ev.TaskCreated, task_id: str | None = None
) -> TaskState:
    """Start a task (``task_id``: a derived one, as :func:`create_trace`'s)."""
    event = msgspec.structs.replace(event, owner=principal.owner)
    task_id = task_id or new_id("task")
    async with _starting(runtime, principal, task_id):
        task: TaskState = await _append_first(runtime, "task", task_id, event)
        return task


async def append_to_task(
    runtime: Runtime, principal: Principal, task_id: str, event: ev.TaskEvent
) -> tuple[TaskState, Recorded]:
    """Append ``event`` to a task the caller owns; returns the state after it. An event on
    a finished task (a resume) starts it again: it counts against the key's cap."""
    state = await access.owned_task(runtime, principal, task_id)
    if not state.is_final:
        return await _append_checked(runtime, "task", task_id, state, lambda _: event)
    async with _starting(runtime, principal, task_id):
        return await _append_checked(runtime, "task", task_id, state, lambda _: event)
