"""``send_message`` delivery: a message from one trace into a collaborator's inbox.

The sender may reach its parent, its sub-traces and its siblings (``collaborators``: a step
trace's are the task's other step traces); the
message is appended to the target's log as ``message_received`` through the trace repository
(a remote sub-agent's goes to its gateway's inbox API),
checked by the target's fold (an ended trace or one without an inbox refuses it). The message
id comes from the sending call's idempotency key, so a call re-run after a crash finds its
message already there and reports it delivered once.
"""

from __future__ import annotations

from dataclasses import KW_ONLY, dataclass

from longhaul.agent.errors import ToolError
from longhaul.core.repository import Repository
from longhaul.domain import events as ev
from longhaul.domain.state import InvalidTransition, TaskState, TraceState
from longhaul.domain.state.collaborators import (
    Collaborator,
    collaborators,
    is_step_trace,
    reachable,
)
from longhaul.executor.remote import RemoteAgents, RemoteError


@dataclass(eq=False)
class LogMessenger:
    traces: Repository[TraceState]
    tasks: Repository[TaskState]
    _: KW_ONLY
    actor: str
    remote: RemoteAgents | None = None

    async def _around(self, sender: TraceState) -> tuple[TraceState | None, TaskState | None]:
        """The sender's parent and, for a step trace, its task (whose logs name the rest)."""
        parent = await self.traces.load(sender.parent_trace_id) if sender.parent_trace_id else None
        task = (
            await self.tasks.load(sender.task_id)
            if is_step_trace(sender) and sender.task_id
            else None
        )
        return parent, task

    async def collaborators(self, state: TraceState) -> list[Collaborator]:
        """Parent, sub-agents, siblings, and each person a running sub-agent waits on (read
        from that child's log: the parent's own only says the child runs)."""
        parent, task = await self._around(state)
        found = collaborators(state, parent, task)
        for info in state.running_subtraces():
            if info.remote is not None:
                continue
            child = await self.traces.load(info.child_trace_id)
            if child.exists and child.wait_reason == "human":
                found.append(
                    Collaborator(
                        name="human",
                        type="human",
                        trace_id=child.trace_id,
                        status=f"asked by {child.trace_id}",
                        summary=child.wait_detail,
                    )
                )
        return found

    async def send(
        self, sender: TraceState, to: str, content: str, message_id: str, *, wake: bool = False
    ) -> str:
        parent, task = await self._around(sender)
        target_id = reachable(sender, parent, to, task)
        if target_id is None:
            names = [c.name for c in collaborators(sender, parent, task) if c.type == "agent"]
            raise ToolError(
                f"{to!r} is not an agent you work with (you can reach: "
                f"{', '.join(names) or 'nobody'})",
                code="unknown_collaborator",
            )
        if target_id.startswith("agent://"):
            await self._send_remote(sender, target_id, content, wake)
            return target_id
        target = await self.traces.load(target_id)
        if target.owner != sender.owner:  # never across API keys, whatever a log says
            raise ToolError(f"{to!r} is not reachable", code="unknown_collaborator")
        # Who the sender is to the recipient.
        if target.parent_trace_id == sender.trace_id:
            name = "parent"
        elif target_id == sender.parent_trace_id:
            name = f"sub-agent {sender.trace_id}"
        else:
            name = f"sibling {sender.trace_id}"
        event = ev.MessageReceived(
            sender=name,
            sender_trace_id=sender.trace_id,
            content=content,
            wake=wake,
            message_id=message_id,
        )
        if any(m.message_id == message_id for m in target.inbox):
            return target_id
        try:
            await self.traces.save(target_id, target, lambda _: [event], actor=self.actor)
        except InvalidTransition as exc:
            if exc.code == "duplicate_message":
                return target_id
            raise ToolError(f"cannot deliver to {to}: {exc}", code="not_delivered") from exc
        return target_id

    async def _send_remote(self, sender: TraceState, target: str, content: str, wake: bool) -> None:
        """To a sub-agent on another longhaul: through its gateway's inbox API, with the key
        configured for that remote (a re-run call may deliver twice: the remote's inbox has
        no idempotency key)."""
        info = next((i for i in sender.subtraces.values() if i.remote_id == target), None)
        if info is None or info.remote is None or self.remote is None:
            raise ToolError(
                f"{target} is not a remote sub-agent of yours", code="unknown_collaborator"
            )
        try:
            await self.remote.send_message(info.remote, target, content, wake=wake)
        except RemoteError as exc:
            raise ToolError(f"cannot deliver to {target}: {exc}", code="not_delivered") from exc
