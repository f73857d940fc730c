"""The seam between the pure engine and the executor shell that makes it durable.

The engine never touches NATS. It reads a :class:`TraceState`, calls a model and tools, and
hands every decision to an :class:`EventSink` *before* taking the next action. The sink appends
the events durably and applies them to the same state object, so after ``emit`` returns the
state reflects them. When the log moved under the engine (a stop request, a human reply), the
sink catches the state up and re-appends if the events still apply, or raises
:class:`StaleState` so the executor re-replays and starts a fresh turn.

A batch passed to one ``emit`` belongs together (a tool's ``GoalChanged`` and its result; an
assistant message and the ``LoopWarned`` it caused): message sequences in it are allocated
ahead of the fold, so the sink must apply them in order and should append them back to back.
The engine re-reads ``state`` after every ``emit`` (``stop_requested`` in particular), so a
sink that catches up foreign events makes the engine react before its next action. A sink
may also offer write-behind (:class:`WriteBehindSink`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import Literal, Protocol, runtime_checkable

import msgspec
from longhaul.domain.events import TraceEvent
from longhaul.domain.state import TraceState
from longhaul.domain.state.collaborators import Collaborator


class StaleState(Exception):
    """The engine's view is out of date and its events no longer apply; end the turn."""


class StopSignalled(StaleState):
    """The shell signalled a stop request while the model was being called: the call was
    cancelled (its connection closed) and nothing of it recorded. The shell re-reads the log,
    which decides: a stop request there is recorded as ``Stopped``; a signal the log does not
    bear out (a refused publish) simply starts a fresh turn."""


class StopSignal(asyncio.Event):
    """The shell's stop signal for one turn: an event that also cancels the task cutting a
    model call short (``engine.interrupt``) the moment it is set, with no waiter task per
    call (two tasks and an ``asyncio.wait`` per model call cost about a tenth of a
    millisecond a step)."""

    def __init__(self) -> None:
        super().__init__()
        self._cut: asyncio.Task[object] | None = None
        self._fired = False

    def cutting(self, task: asyncio.Task[object]) -> None:
        """Cancel ``task`` when the signal is set, until :meth:`cut_off`."""
        self._cut, self._fired = task, False

    def cut_off(self) -> bool:
        """End :meth:`cutting`: whether :meth:`set` cancelled the task meanwhile."""
        self._cut = None
        return self._fired

    def set(self) -> None:
        super().set()
        task, self._cut = self._cut, None
        # Set by the call itself (only a test's scripted model does): it keeps its answer
        # and the next call sees the signal; the shell sets it from its subscription's task.
        if task is not None and task is not asyncio.current_task() and task.cancel():
            self._fired = True


class EffectNotRecorded(Exception):
    """The ledger's ``effect_started`` could not be appended: the call must not act, and the
    turn ends (the wake-up comes again; the call, which never acted, is then interrupted)."""


class EventSink(Protocol):
    async def emit(self, events: Sequence[TraceEvent]) -> None:
        """Durably append ``events`` (in order) and apply them to the turn's state."""
        ...


@runtime_checkable
class WriteBehindSink(EventSink, Protocol):
    """A sink that can leave an append in flight while the engine works on (the executor's).

    The engine uses it for a tool's result only: what follows is building the next model
    request and calling the model, which change nothing outside the process. Before anything
    that does (a tool call) or any other append, the sink settles: the log keeps the engine's
    order, and a crash loses at most the call in flight, as with :meth:`EventSink.emit`."""

    async def emit_behind(self, events: Sequence[TraceEvent]) -> None:
        """Append ``events``, applying them to the state; their append may still be in flight
        on return."""
        ...

    async def hold(self, events: Sequence[TraceEvent]) -> None:
        """Apply ``events`` to the state now and append them with the next emit, in one
        batch: for events followed only by work a crash would simply repeat (calls that are
        all ``read_only``)."""
        ...

    async def settle(self) -> None:
        """Wait for the append left in flight (:class:`StaleState` if it lost a race)."""
        ...


class LiveUpdate(msgspec.Struct, kw_only=True, omit_defaults=True):
    """Not persisted: token deltas, tool progress and retry notices for watchers."""

    kind: Literal["delta", "tool_start", "tool_end", "retry", "status", "switch"]
    text: str = ""
    reason: str | None = None
    """``switch``: why the model was switched (``ModelSwitched.reason``)."""
    tool: str | None = None
    tool_call_id: str | None = None
    sequence: int | None = None


LiveCallback = Callable[[LiveUpdate], Awaitable[None]]


class ProviderBreaker(Protocol):
    """A circuit breaker per provider, shared by every executor of the deployment (the
    executor keeps its state in KV). The engine asks before a call that has somewhere to fall
    back to and reports how each call went; an open circuit is skipped without a call."""

    async def allow(self, provider: str) -> bool:
        """Whether to call ``provider`` now: its circuit is closed, or half-open and this
        caller won the probe."""
        ...

    async def failed(self, provider: str) -> None:
        """A call failed with an outage (counted towards opening the circuit)."""
        ...

    async def succeeded(self, provider: str) -> None:
        """A call succeeded (closes a half-open circuit)."""
        ...


TurnEnd = Literal[
    "completed",  # final answer accepted (no verification, or verification passed)
    "waiting",  # verification, human or children: the turn ends, the lease is released
    "stopped",  # stop request, loop detection or a budget (see stop_reason)
    "failed",  # unrecoverable error or verification exhausted
    "max_iterations",  # the run's iteration budget ran out: the engine already emitted
    # ``Stopped(reason="max_iterations")``; a ``run_requested`` starts a new run (and budget)
]


class TurnOutcome(msgspec.Struct, kw_only=True):
    """How a turn ended. ``steps``: model calls made in this turn. ``stop_reason``: for
    ``stopped`` / ``max_iterations`` / ``failed`` the reason recorded on the trace
    (``stop_requested``, ``loop_detected``, ``max_tokens``, ``max_cost``,
    ``max_iterations``, ``model_error``, ``verification_failed``, ``config_error``)."""

    end: TurnEnd
    steps: int = 0
    stop_reason: str | None = None


class Messenger(Protocol):
    """How ``send_message`` reaches another trace: the executor's port to the log (this
    library never touches another trace's log itself)."""

    async def send(
        self, sender: TraceState, to: str, content: str, message_id: str, *, wake: bool = False
    ) -> str:
        """Deliver ``content`` into the inbox of the collaborator ``to`` names; returns its
        trace id. Raises :class:`ToolError` when ``to`` is not reachable."""
        ...

    async def collaborators(self, state: TraceState) -> list[Collaborator]:
        """Everyone ``state`` works with, read from their logs (parent, sub-agents,
        siblings, persons being waited on): what the context injection lists."""
        ...
