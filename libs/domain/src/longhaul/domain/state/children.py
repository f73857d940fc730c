"""A trace's sub-traces, a fold of its own: each one spawned (``subtrace_spawned``), linked on
a remote longhaul (``remote_subtrace_linked``) and finished (``subtrace_finished``, with what
its run used and what it reported of its own sub-traces).

``TraceState`` settles the goal of the call that spawned a child and wakes a trace that waits
on its children; the records and their rules are here.
"""

from __future__ import annotations

import msgspec
from longhaul.domain import events as ev
from longhaul.domain.state.errors import InvalidTransition

CONTEXT_HEADING = "\n\nContext from the agent that delegated this:\n"


class SubtraceInfo(msgspec.Struct, kw_only=True):
    child_trace_id: str
    tool_call_id: str
    mode: str = "delegate"
    task: str = ""
    status: str = "running"
    summary: str = ""
    preset: str = "default"
    continue_from: str | None = None
    skills: list[str] = msgspec.field(default_factory=list)
    goal_id: str | None = None
    """The ``agent_call`` goal of the call that spawned the child (the child's
    ``parent_goal_id``)."""
    descendants: int = 0
    """The child's own sub-traces, as its ``subtrace_finished`` reported them."""
    model_calls: int = 0
    """The child's model calls, as its ``subtrace_finished`` reported them."""
    trace_context: dict[str, str] | None = None
    """The spawning tool call's trace context: the child's run continues it."""
    remote: str | None = None
    """The configured remote longhaul running this child (``None``: a local sub-trace)."""
    remote_id: str | None = None
    """``agent://<host:port>/<trace id>`` once the remote gateway accepted it."""
    linked: bool = False
    """The remote accepted this spawn (a ``continue_from`` spawn needs a new link)."""
    messages: list[ev.InputMessage] = msgspec.field(default_factory=list)
    """The conversation the child is seeded with, before its task."""
    context: str | None = None
    """Background the parent handed the child."""

    def inputs(self) -> list[ev.InputMessage]:
        """What the child is given: the seeded messages, then its task (with the parent's
        context under it)."""
        task = self.task if not self.context else f"{self.task}{CONTEXT_HEADING}{self.context}"
        return [*self.messages, ev.InputMessage(role="user", content=task)]

    @property
    def display_id(self) -> str:
        return self.remote_id or self.child_trace_id


class Children(msgspec.Struct, kw_only=True):
    subtraces: dict[str, SubtraceInfo] = msgspec.field(default_factory=dict)
    """Child trace id → its record, in the order they were first spawned."""

    # queries ---------------------------------------------------------------------------------

    def running(self) -> list[SubtraceInfo]:
        return [info for info in self.subtraces.values() if info.status == "running"]

    @property
    def descendants(self) -> int:
        """Sub-traces below at every level, as far as this log knows: the trace's own, plus
        what finished children reported of theirs."""
        return len(self.subtraces) + sum(info.descendants for info in self.subtraces.values())

    def model_calls(self) -> int:
        """Model calls the children reported (a parent's ``agent_call`` goal is charged them)."""
        return sum(info.model_calls for info in self.subtraces.values())

    def of(self, child_ids: list[str]) -> list[SubtraceInfo]:
        """The records of ``child_ids`` this trace knows, in that order."""
        return [self.subtraces[c] for c in child_ids if c in self.subtraces]

    # rules -----------------------------------------------------------------------------------

    def check_linked(self, event: ev.RemoteSubtraceLinked) -> None:
        info = self.subtraces.get(event.child_trace_id)
        if info is None or info.remote is None:
            raise InvalidTransition(f"no remote sub-trace {event.child_trace_id}", code="not_found")

    def check_finished(self, event: ev.SubtraceFinished) -> None:
        if event.child_trace_id not in self.subtraces:
            raise InvalidTransition(f"unknown sub-trace {event.child_trace_id}", code="not_found")

    # changes ---------------------------------------------------------------------------------

    def spawned(self, event: ev.SubtraceSpawned, goal_id: str | None) -> None:
        """A spawn (again, for a ``continue_from``) keeps the remote id a link gave it."""
        previous = self.subtraces.get(event.child_trace_id)
        self.subtraces[event.child_trace_id] = SubtraceInfo(
            remote=event.remote,
            remote_id=previous.remote_id if previous is not None else None,
            child_trace_id=event.child_trace_id,
            tool_call_id=event.tool_call_id,
            mode=event.mode,
            task=event.task,
            preset=event.preset,
            continue_from=event.continue_from,
            skills=event.skills,
            messages=list(event.messages),
            context=event.context,
            goal_id=goal_id,
            trace_context=event.trace_context,
        )

    def linked(self, event: ev.RemoteSubtraceLinked) -> None:
        info = self.subtraces[event.child_trace_id]
        info.remote_id = event.remote_id
        info.linked = True

    def finished(self, event: ev.SubtraceFinished) -> SubtraceInfo:
        info = self.subtraces[event.child_trace_id]
        info.status = event.status
        info.summary = event.summary
        info.descendants = event.descendants
        info.model_calls = event.model_calls
        return info
