"""Where a run stands, as the protocol surfaces (``/v1``, ``/mcp``, ``/a2a``) report it, and
:class:`RunFollower`, the base they share for following one.

Those clients ask one question — "start this and tell me how it ended" — so what they need is
the run's *outcome*: the answer once it completed, the question once it waits for a person,
the error once it failed. :func:`follow` watches the trace's log (and, on request, its live
token deltas) from the request's own event until the run settles, which is the same stream
``/api/traces/{id}/events`` serves.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator
from dataclasses import dataclass
from typing import Any

import msgspec
from longhaul.domain import events as ev
from longhaul.domain.state import TraceState
from longhaul.gateway import access
from longhaul.gateway.auth import Principal
from longhaul.gateway.runtime import Runtime
from longhaul.gateway.streams import Item, aggregate_stream

PERSON_WAITS = frozenset({"human", "approval", "client_tools"})
"""Waits that end a request: nothing happens until someone acts (a wait on sub-traces or a
verifier resolves by itself, so a follower keeps following)."""

_ENDS = frozenset({"completed", "failed", "stopped"})


@dataclass(frozen=True)
class RunOutcome:
    trace_id: str
    status: str
    answer: str | None
    """The last assistant text on the main path (the final answer once completed)."""
    question: str | None
    """What the run asks, while it waits for a person."""
    wait_reason: str | None
    error: str | None
    totals: dict[str, Any]

    @property
    def settled(self) -> bool:
        return self.status in _ENDS or (
            self.status == "waiting" and self.wait_reason in PERSON_WAITS
        )

    def as_dict(self) -> dict[str, Any]:
        return {
            "trace_id": self.trace_id,
            "status": self.status,
            "answer": self.answer,
            "question": self.question,
            "wait_reason": self.wait_reason,
            "error": self.error,
            "totals": self.totals,
        }


def text_of(content: str | list[dict[str, Any]] | None) -> str:
    """A message's text: its string, or its text parts joined."""
    if isinstance(content, str):
        return content
    return "".join(
        str(part.get("text", "")) for part in content or [] if part.get("type") == "text"
    )


def last_answer(state: TraceState) -> str | None:
    for message in reversed(state.main_path()):
        if message.role == "assistant" and not message.tool_calls:
            return text_of(message.content)
        if message.role == "user":
            return None
    return None


def outcome_of(state: TraceState) -> RunOutcome:
    status = state.status or "running"
    waiting = status == "waiting"
    return RunOutcome(
        trace_id=state.trace_id,
        status=status,
        answer=last_answer(state),
        question=state.wait_detail if waiting and state.wait_reason == "human" else None,
        wait_reason=state.wait_reason if waiting else None,
        error=state.error if status == "failed" else state.stop_reason,
        totals=msgspec.to_builtins(state.totals),
    )


def viewer_link(base_url: str, trace_id: str) -> str:
    """The run viewer's page of the trace (the viewer routes on the URL's fragment)."""
    return f"{base_url.rstrip('/')}/#/traces/{trace_id}"


def settles(item: Item) -> bool:
    """A stored event after which the run is over or waits for someone."""
    if item.kind != "event":
        return False
    if item.type in _ENDS:
        return True
    if item.type == "waiting":
        waiting = msgspec.json.decode(item.data, type=dict[str, Any])
        return waiting.get("reason") in PERSON_WAITS
    return False


async def follow(
    runtime: Runtime, trace_id: str, *, after: int, live: bool = False
) -> AsyncGenerator[Item, None]:
    """The trace's events after ``after`` (with live deltas if ``live``), ending with the one
    that settles the run; callers bound it in time."""
    items = aggregate_stream(runtime, "trace", trace_id, after=after, follow=True, live=live)
    async with contextlib.aclosing(items):
        async for item in items:
            if item.kind == "error":
                message = msgspec.json.decode(item.data, type=dict[str, Any])["message"]
                raise ConnectionError(message)
            yield item
            if settles(item):
                return


def decoded(item: Item) -> ev.Event | None:
    """The stored event an item carries (None for live, heartbeat and notice items)."""
    return ev.decode(item.data) if item.kind == "event" else None


def step_line(event: ev.Event) -> str | None:
    """One progress line per step a watcher cares about (MCP progress, A2A status updates)."""
    if isinstance(event, ev.MessageAppended) and event.role == "assistant":
        names = [call.function.name for call in event.tool_calls or []]
        return f"calls {', '.join(names)}" if names else "answered"
    if isinstance(event, ev.MessageAppended) and event.role == "tool":
        return f"{event.name or 'tool'} returned"
    if isinstance(event, ev.Waiting):
        return f"waits for {event.reason}"
    if isinstance(event, ev.Completed | ev.Failed | ev.Stopped):
        return event.type
    return None


class RunFollower:
    """What every protocol server does with a run it started or answered: follow it until it
    settles, never longer than ``gateway.completion_timeout_s`` (a client waiting on one HTTP
    request); past the bound, the run goes on and the client is told where it stands."""

    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime

    @property
    def timeout_s(self) -> float:
        return self.runtime.config.gateway.completion_timeout_s

    async def items(
        self, trace_id: str, after: int, *, live: bool = False, timeout_s: float | None = None
    ) -> AsyncGenerator[Item, None]:
        """:func:`follow` within the bound: it ends at the settling event or at the bound."""
        deadline = asyncio.get_running_loop().time() + (
            self.timeout_s if timeout_s is None else timeout_s
        )
        async with contextlib.aclosing(
            follow(self.runtime, trace_id, after=after, live=live)
        ) as items:
            while True:
                try:
                    async with asyncio.timeout_at(deadline):
                        item = await anext(items)
                except (StopAsyncIteration, TimeoutError):
                    return
                yield item

    async def steps(self, trace_id: str, after: int) -> AsyncGenerator[tuple[Item, str], None]:
        """Each step a watcher reports (:func:`step_line`), within the bound."""
        async with contextlib.aclosing(self.items(trace_id, after)) as items:
            async for item in items:
                event = decoded(item)
                line = step_line(event) if event is not None else None
                if line is not None:
                    yield item, line

    async def settled(
        self, principal: Principal, trace_id: str, after: int, timeout_s: float | None = None
    ) -> TraceState:
        """The trace once its run settled, or as it stands at the bound."""
        async with contextlib.aclosing(self.items(trace_id, after, timeout_s=timeout_s)) as items:
            async for _ in items:
                pass
        return await access.owned_trace(self.runtime, principal, trace_id)

    async def standing(self, principal: Principal, trace_id: str, base_url: str) -> dict[str, Any]:
        """The run's outcome now, with its viewer link."""
        state = await access.owned_trace(self.runtime, principal, trace_id)
        return {**outcome_of(state).as_dict(), "viewer": viewer_link(base_url, trace_id)}
