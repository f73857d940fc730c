"""Erasing a trace with its family (``DELETE`` of a trace or task, retention, a key's data):
stop, wait until nobody runs it, erase.

Order is what makes it safe against an executor turn in flight. Every member of the family
(the trace and its local sub-traces, recursively) that has not ended is asked to stop — the
executor stops the trace's remote children as it does for any stopped parent — and the
gateway waits until each member is final *and* its lease is free: an executor writes its
last snapshot and index entry before it releases the lease, so from then on no turn of the
family is running. Then each member is erased (``longhaul.core.erasure``), deepest first and
the trace itself last, so a delete cut short is finished by a repeat. A wake-up that folded
the trace just before the erasure finds the log purged (its append's expected position no
longer exists) and the index entry buried under a tombstone it cannot outrank.
"""

from __future__ import annotations

import asyncio
import logging
import re
import time

import msgspec
import nats.errors
from longhaul.agent.images import SCHEME
from longhaul.core.erasure import Removed
from longhaul.core.index import TraceIndexEntry
from longhaul.core.kv import get_entry
from longhaul.domain import events as ev
from longhaul.domain.erasure import WorkdirErased, WorkdirErasure
from longhaul.domain.state import TaskState, TraceState
from longhaul.gateway import access, commands
from longhaul.gateway.auth import Principal
from longhaul.gateway.errors import ApiError, not_found
from longhaul.gateway.liveness import READY_TIMEOUT_S, presences
from longhaul.gateway.runtime import RETRY, Runtime

log = logging.getLogger(__name__)

STOP_WAIT_S = 30.0
"""How long a delete waits for the family's turns to stop before answering 409."""
WORKDIR_WAIT_S = 5.0
_IMAGE = re.compile(re.escape(SCHEME) + r"([0-9a-f]{64})")


async def family_of(runtime: Runtime, root: TraceState) -> list[TraceState]:
    """The trace and its local sub-traces, parents before children. A child counts only if it
    names the member as its parent: a log that names a trace it did not spawn (a crafted
    import) never pulls that trace into an export or an erasure."""
    members = [root]
    seen = {root.trace_id}
    for member in members:
        for info in member.subtraces.values():
            if info.remote is None and info.child_trace_id not in seen:
                seen.add(info.child_trace_id)
                child = await runtime.traces.load(info.child_trace_id)
                if child.exists and child.parent_trace_id == member.trace_id:
                    members.append(child)
    return members


async def _lease_free(runtime: Runtime, trace_id: str) -> bool:
    kv = await runtime.service.conn.kv(runtime.service.conn.names.leases)
    entry = await get_entry(kv, f"trace.{trace_id}")
    return entry is None or not entry.value


async def _executors_present(runtime: Runtime) -> bool:
    """Whether any executor is consuming: with none, a trace nobody holds will not stop by
    itself, and nobody can run it while it is erased (a later one finds it gone)."""
    conn = runtime.service.conn
    return bool(await asyncio.wait_for(presences(conn), READY_TIMEOUT_S))


async def _settled(runtime: Runtime, members: list[TraceState]) -> None:
    """Wait until no executor holds any member and each has ended — or no executor is
    there to end it (409 past the deadline; the stops are recorded, so a repeat finds them
    done)."""
    deadline = time.monotonic() + STOP_WAIT_S
    pause = 0.05
    for state in members:
        while True:
            await runtime.traces.catch_up(state.trace_id, state)
            if await _lease_free(runtime, state.trace_id) and (
                state.is_final or not await _executors_present(runtime)
            ):
                break
            if time.monotonic() > deadline:
                raise ApiError(
                    409,
                    "conflict",
                    f"trace {state.trace_id} is still stopping; send the delete again",
                    headers={"Retry-After": "2"},
                )
            await asyncio.sleep(pause)  # polls the fold and the lease: no event says "released"
            pause = min(pause * 2, 0.5)


def images_named(members: list[TraceState]) -> set[str]:
    """The stored images the family's messages name (``longhaul.agent.images``)."""
    digests: set[str] = set()
    for state in members:
        for message in state.all_messages():
            if not isinstance(message.content, str):
                digests.update(_IMAGE.findall(msgspec.json.encode(message.content).decode()))
    return digests


async def _remove_workdir(runtime: Runtime, owner: str, scope: str | None) -> str:
    """Ask the executors to remove the directory: ``removed``, ``absent`` or ``unreached``
    (no executor answered: it is removed by none, say so)."""
    conn = runtime.service.conn
    body = msgspec.json.encode(WorkdirErasure(owner=owner, scope=scope))
    try:
        reply = await conn.nc.request(conn.names.erasures, body, timeout=WORKDIR_WAIT_S)
    except (nats.errors.NoRespondersError, nats.errors.TimeoutError):
        log.warning("no executor answered the erasure of %s's working directory", scope)
        return "unreached"
    return "removed" if msgspec.json.decode(reply.data, type=WorkdirErased).removed else "absent"


async def _stopped_family(runtime: Runtime, roots: list[TraceState]) -> list[TraceState]:
    """The roots' families, asked to stop and settled. A turn may spawn a child between the
    first look and its stop, so the family is looked at again once settled, until no new
    member appears."""
    known: set[str] = set()
    try:
        while True:
            async with runtime.nats_call():
                members = [m for root in roots for m in await family_of(runtime, root)]
                if {m.trace_id for m in members} <= known:
                    return members
                known = {m.trace_id for m in members}
                for state in members:
                    await commands.stop_for_erasure(runtime, state)
            async with asyncio.timeout(STOP_WAIT_S + runtime.deadline_s):
                await _settled(runtime, members)
    except (TimeoutError, nats.errors.Error) as exc:
        raise ApiError(
            503, "unavailable", f"event store unavailable: {type(exc).__name__}", headers=RETRY
        ) from exc


async def _erase_families(runtime: Runtime, owner: str | None, roots: list[TraceState]) -> Removed:
    """Stop, settle and erase each root's family; the images its messages name (stored
    under ``owner``) go too."""
    members = await _stopped_family(runtime, roots)
    eraser = runtime.service.eraser
    removed = Removed()
    digests = sorted(images_named(members)) if owner else []
    images = [f"images/{owner}/{digest}" for digest in digests]
    async with runtime.nats_call():
        for state in reversed(members):
            own_images = images if state is members[0] else []
            removed.add(await eraser.erase_trace(state.trace_id, workspace=own_images))
            runtime.mirror.put(TraceIndexEntry.tombstone(state.trace_id))
        if owner is not None:
            await eraser.forget_spent(owner, [state.trace_id for state in members])
    runtime.metrics.erased.labels("trace").inc(len(members))
    return removed


def _report(removed: Removed, working_dir: str) -> dict[str, object]:
    return {
        "deleted": removed.ids,
        "events": removed.events,
        "entries": removed.entries,
        "objects": removed.objects,
        "working_dir": working_dir,
    }


async def _erase_trace(
    runtime: Runtime, owner: str | None, root: TraceState
) -> tuple[Removed, str]:
    """Erase ``root``'s family and, for a top-level trace, its working directory."""
    removed = await _erase_families(runtime, owner, [root])
    workdir = "shared"  # a sub-trace or a step trace works in its root's or task's directory
    if root.parent_trace_id is None and root.task_id is None:
        workdir = (
            "absent" if owner is None else await _remove_workdir(runtime, owner, root.trace_id)
        )
    return removed, workdir


async def erase_owned_trace(
    runtime: Runtime, principal: Principal, trace_id: str
) -> dict[str, object]:
    root = await access.owned_trace(runtime, principal, trace_id)
    removed, workdir = await _erase_trace(runtime, principal.owner, root)
    return {"trace_id": trace_id, **_report(removed, workdir)}


async def erase_trace_family(
    runtime: Runtime, owner: str | None, trace_id: str
) -> tuple[Removed, str]:
    """Retention's erasure: no caller to check, the index named the owner."""
    async with runtime.nats_call():
        root = await runtime.traces.load(trace_id)
    if not root.exists:
        raise not_found("trace", trace_id)
    return await _erase_trace(runtime, owner, root)


def _erasable(task: TaskState) -> bool:
    """A task that has ended or waits for its plan's review. One still planning or running
    is not: nothing stops a task's planner yet, and a step trace it started after the
    erasure would belong to nobody."""
    return task.is_final or task.status == "awaiting_review"


async def _erase_task(runtime: Runtime, principal: Principal, task: TaskState) -> Removed:
    """The task's step traces (each with its family), then the task's own records."""
    async with runtime.nats_call():
        steps = [await runtime.traces.load(step) for step in task.step_traces]
    removed = await _erase_families(runtime, principal.owner, [s for s in steps if s.exists])
    async with runtime.nats_call():
        removed.add(await runtime.service.eraser.erase_task(task.task_id))
    runtime.metrics.erased.labels("task").inc()
    return removed


async def erase_owned_task(
    runtime: Runtime, principal: Principal, task_id: str
) -> dict[str, object]:
    task = await access.owned_task(runtime, principal, task_id)
    if not _erasable(task):
        raise ApiError(
            409,
            "conflict",
            f"task {task_id} is {task.status}: it can be deleted once it has ended",
        )
    removed = await _erase_task(runtime, principal, task)
    workdir = await _remove_workdir(runtime, principal.owner, task_id)
    return {"task_id": task_id, **_report(removed, workdir)}


async def _tasks_of(runtime: Runtime, owner: str) -> list[TaskState]:
    """The key's tasks (every task's creation is read: an operator's rare, whole-key job)."""
    found = []
    for task_id in await access.task_ids(runtime):
        async with runtime.nats_call():
            created = await access.first_event(runtime, "task", task_id)
            if isinstance(created, ev.TaskCreated) and created.owner == owner:
                found.append(await runtime.tasks.load(task_id))
    return found


async def erase_key(runtime: Runtime, owner: str) -> dict[str, object]:
    """Every trace, task, schedule (with its failed ticks' log), experience, eval run, upload
    and image of one API key (the operator's).
    Its traces are found through the index; a task still planning or running is left and
    named in ``skipped`` (see :func:`_erasable`), with its directory."""
    principal = Principal(owner)
    tasks = await _tasks_of(runtime, owner)
    mirror = runtime.mirror
    async with runtime.nats_call():
        roots = [
            await runtime.traces.load(entry.trace_id)
            for entry in list(mirror.entries.values())
            if entry.parent_trace_id is None
            and entry.task_id is None
            and mirror.owner_of(entry) == owner
        ]
    removed = await _erase_families(runtime, owner, [r for r in roots if r.exists])
    skipped = [task.task_id for task in tasks if not _erasable(task)]
    for task in tasks:
        if _erasable(task):
            removed.add(await _erase_task(runtime, principal, task))
    async with runtime.nats_call():
        for schedule in await runtime.schedule_store.owned(owner):
            removed.add(await runtime.service.eraser.erase_schedule(schedule.schedule_id))
        removed.add(await runtime.service.eraser.erase_key_records(owner))
    if skipped:  # a running task keeps its directory: only the erased ones' go
        for scope in [r.trace_id for r in roots] + [t.task_id for t in tasks if _erasable(t)]:
            await _remove_workdir(runtime, owner, scope)
        workdir = "shared"
    else:
        workdir = await _remove_workdir(runtime, owner, None)
    return {"owner": owner, "skipped": skipped, **_report(removed, workdir)}
