"""Sub-traces: creating children a parent spawned, and reporting their end to the parent.

A ``subtrace_spawned`` on the parent (seen as a wake-up, so a crash right after the spawn loses
nothing) creates the child trace, at most ``max_concurrent`` running per parent: the others stay
queued in the parent's state (spawned, child not created yet) and start, in spawn order, as
earlier children finish. "Started" is simply "the child's log exists", so every step here is
idempotent and any replica may do it. A spawn that continues a finished child
(``continue_from``) appends ``RunRequested`` with the new task to that child instead; the
child counts as started once it runs again. When a child reaches a final status its parent gets
``SubtraceFinished`` (unless the parent's state already has it), which wakes a parent that waits
for its children; a parent that ends first asks its still-running children to stop. A child's
first event carries the trace context of the parent's tool call that spawned it, so its turns
are that tool span's children whichever wake-up creates it.
"""

from __future__ import annotations

import asyncio
import logging
import weakref

from longhaul.core.index import TraceIndex
from longhaul.core.repository import Repository
from longhaul.domain import events as ev
from longhaul.domain.state import SubtraceInfo, TraceState
from longhaul.executor.appends import append_while
from longhaul.executor.metrics import ExecutorMetrics
from longhaul.executor.remote import RemoteAgents, RemoteError, failure, finish_remote
from longhaul.executor.remote_status import RemoteStatus

log = logging.getLogger(__name__)

SUMMARY_LIMIT = 4000


def remaining(limit: float | None, used: float) -> float | None:
    return None if limit is None else max(limit - used, 0)


def child_config(parent: TraceState, info: SubtraceInfo) -> ev.TraceConfig:
    """The child runs the parent's model in the spawned preset, with at most the tools the
    parent was offered (a client's ``tools`` list or a narrow preset is never widened by
    delegating: the child's preset can only narrow it further); explore children are
    read-only; the parent's approval list holds for the child too, and so does what is left
    of the parent's run budget for tokens and cost (the child's usage is added to the
    parent's run when it finishes, so a root limit is not escaped by delegating)."""
    config = parent.config
    tokens = remaining(config.max_tokens, parent.run_usage.tokens)
    return ev.TraceConfig(
        max_tokens=None if tokens is None else int(tokens),
        max_cost=remaining(config.max_cost, parent.run_usage.cost),
        model=config.model,
        preset=info.preset,
        tools=parent.tools_for_children(),
        skills=info.skills,
        working_dir=config.working_dir,
        temperature=config.temperature,
        model_params=config.model_params,
        read_only=config.read_only or info.mode == "explore",
        approval=config.approval,
        messaging=config.messaging,
    )


def child_allowance(parent: TraceState, limit: int) -> int:
    """The child's share of the root's descendant limit: what the parent has left once its
    children so far (this one included) are counted."""
    allowed = limit if parent.max_descendants is None else parent.max_descendants
    return max(allowed - parent.descendants, 0)


def child_created(parent: TraceState, info: SubtraceInfo, limit: int = 50) -> ev.TraceCreated:
    label = parent.name or parent.trace_id
    return ev.TraceCreated(
        messages=info.inputs(),
        config=child_config(parent, info),
        name=f"{label} / {info.mode}",
        owner=parent.owner,
        parent_trace_id=parent.trace_id,
        parent_goal_id=info.goal_id,
        parent_tool_call_id=info.tool_call_id,
        task_id=parent.task_id,
        phase_id=parent.phase_id,
        root_trace_id=parent.root_trace_id or parent.trace_id,
        depth=parent.depth + 1,
        max_descendants=child_allowance(parent, limit),
        trace_context=info.trace_context,
    )


def final_summary(child: TraceState) -> str:
    """What the parent learns: the child's summary, else its error or stop reason, else its
    last assistant text."""
    if child.status == "completed" and child.summary:
        return child.summary[:SUMMARY_LIMIT]
    if child.status == "failed" and child.error:
        return f"failed: {child.error}"[:SUMMARY_LIMIT]
    if child.status == "stopped":
        return f"stopped: {child.stop_reason or 'stop requested'}"
    for message in reversed(child.main_path()):
        if message.role == "assistant" and isinstance(message.content, str) and message.content:
            return message.content[:SUMMARY_LIMIT]
    return child.summary or ""


class Children:
    def __init__(
        self,
        traces: Repository[TraceState],
        *,
        max_concurrent: int,
        actor: str,
        metrics: ExecutorMetrics,
        max_descendants: int = 50,
        remote: RemoteAgents | None = None,
        index: TraceIndex | None = None,
    ) -> None:
        self.traces = traces
        self.remote = remote
        self.index = index
        """Written after a remote link, so the gateway can serve the remote child at once."""
        self.max_descendants = max_descendants
        self.max_concurrent = max(1, max_concurrent)
        self.actor = actor
        self.metrics = metrics
        self._starting: weakref.WeakValueDictionary[str, asyncio.Lock] = (
            weakref.WeakValueDictionary()
        )

    async def start_queued(self, parent: TraceState) -> list[str]:
        """Create the children the parent is owed, up to the limit; returns the ids started.
        One parent's spawns are started one wake-up at a time in this process, on the
        parent as it stands then: two wake-ups of one turn's spawns would otherwise both
        send a remote child that is not linked yet (an A2A agent has no idempotency key)."""
        lock = self._starting.setdefault(parent.trace_id, asyncio.Lock())
        async with lock:
            return await self._start_queued(await self.traces.load(parent.trace_id))

    async def _start_queued(self, parent: TraceState) -> list[str]:
        if not parent.exists or parent.is_final:
            return []
        active = 0
        queued: list[tuple[SubtraceInfo, TraceState | None]] = []
        for info in parent.running_subtraces():
            if info.remote is not None:
                if info.linked:
                    active += 1
                else:
                    queued.append((info, None))
            elif info.continue_from is not None:
                child = await self.traces.load(info.child_trace_id)
                if child.exists and not child.is_final:
                    active += 1
                else:
                    queued.append((info, child))
            elif await self.traces.exists(info.child_trace_id):
                active += 1
            else:
                queued.append((info, None))
        started: list[str] = []
        for info, previous in queued[: max(0, self.max_concurrent - active)]:
            if await self._start(parent, info, previous):
                self.metrics.subtraces.inc()
                started.append(info.child_trace_id)
        return started

    async def _start(
        self, parent: TraceState, info: SubtraceInfo, previous: TraceState | None
    ) -> bool:
        """Create the child, or continue a finished one with the new task."""
        if info.remote is not None:
            return await self._start_remote(parent, info, info.remote)
        if previous is not None and previous.exists:
            return await append_while(
                self.traces,
                previous,
                ev.RunRequested(
                    messages=info.inputs(),
                    trace_context=info.trace_context,
                ),
                lambda child: child.is_final,
                actor=self.actor,
            )
        created = await self.traces.create(
            info.child_trace_id,
            child_created(parent, info, self.max_descendants),
            actor=self.actor,
            causation_id=parent.trace_id,
            correlation_id=parent.task_id,
        )
        return created is not None  # None: another replica created it first

    async def _start_remote(self, parent: TraceState, info: SubtraceInfo, name: str) -> bool:
        """Create the child on the remote longhaul and link it, or end it with the reason."""
        try:
            if self.remote is None:
                raise RemoteError(f"remote agent {name!r} is not configured here")
            linked = await self.remote.start(parent, info, name)
        except RemoteError as exc:
            log.warning("remote child of %s not started: %s", parent.trace_id, exc)
            linked = failure(str(exc))
        if isinstance(linked, RemoteStatus):  # refused, or an A2A agent's immediate answer
            await finish_remote(self.traces, parent, info.child_trace_id, linked, actor=self.actor)
            return False
        appended = await append_while(
            self.traces,
            parent,
            ev.RemoteSubtraceLinked(child_trace_id=info.child_trace_id, remote_id=linked),
            lambda p: (
                _child_running(p, info.child_trace_id)
                and not p.subtraces[info.child_trace_id].linked
            ),
            actor=self.actor,
        )
        if appended and self.index is not None:
            await self.index.update(parent)
        return appended

    async def _stop_remote(self, info: SubtraceInfo, name: str) -> None:
        """Best effort: the remote trace is asked to stop; its end reaches the parent through
        the remote wait as usual."""
        if self.remote is None or info.remote_id is None:
            return
        try:
            await self.remote.stop(name, info.remote_id)
        except RemoteError as exc:
            log.warning("could not stop remote child %s: %s", info.remote_id, exc)

    async def on_child_final(self, child: TraceState) -> None:
        """Record the child's end on its parent (once) and start the parent's next child."""
        if child.parent_trace_id is None or not child.is_final:
            return
        parent = await self.traces.load(child.parent_trace_id)
        finished = ev.SubtraceFinished(
            child_trace_id=child.trace_id,
            status=child.status or "failed",
            summary=final_summary(child),
            tokens=child.run_usage.tokens,
            cost=child.run_usage.cost,
            descendants=child.descendants,
            model_calls=child.run_model_calls(),
            duration_ms=max(int((child.updated_at - child.run_started_at) * 1000), 0),
        )
        await append_while(
            self.traces,
            parent,
            finished,
            lambda p: _child_running(p, child.trace_id),
            actor=self.actor,
        )
        await self.start_queued(parent)

    async def stop_children(self, parent: TraceState, reason: str) -> None:
        """Ask the parent's running children to stop (a finished parent has no use for them)."""
        for info in parent.running_subtraces():
            if info.remote is not None:
                await self._stop_remote(info, info.remote)
                continue
            child = await self.traces.load(info.child_trace_id)
            if child.exists and not child.is_final and not child.stop_requested:
                await append_while(
                    self.traces,
                    child,
                    ev.StopRequested(reason=reason),
                    lambda c: c.exists and not c.is_final and not c.stop_requested,
                    actor=self.actor,
                )


def _child_running(parent: TraceState, child_id: str) -> bool:
    info = parent.subtraces.get(child_id)
    return info is not None and info.status == "running"
