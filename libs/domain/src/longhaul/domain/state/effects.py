"""The effect ledger, a fold of its own: which tool calls with effects outside the trace
started acting, and what happened to each one cut off by a crash.

``effect_started`` is appended before a call with effects acts; its tool result settles it.
A started call without a result has an **unknown outcome**: the executor died while it acted.
The ledger keeps, per call, its start, each resumption (``effect_resumed``) and the person's
decision that applies to the next resumption. A decision is used up by the re-run it
allows, so a call cut off again is asked about again.
"""

from __future__ import annotations

import msgspec
from longhaul.domain import events as ev
from longhaul.domain.state.errors import InvalidTransition


class Effect(msgspec.Struct, kw_only=True):
    """One call's record: its start, how each resumption dealt with it, and a pending
    decision (a person's, for an ``asked`` call)."""

    started: ev.EffectStarted
    resumed: list[ev.EffectResumed] = msgspec.field(default_factory=list)
    decision: ev.ToolDecided | None = None

    @property
    def cut_off(self) -> bool:
        """At least one resumption found it without a result."""
        return bool(self.resumed)


class Ledger(msgspec.Struct, kw_only=True):
    effects: dict[str, Effect] = msgspec.field(default_factory=dict)

    def get(self, tool_call_id: str) -> Effect | None:
        return self.effects.get(tool_call_id)

    def __contains__(self, tool_call_id: object) -> bool:
        return tool_call_id in self.effects

    def unsettled(self, calls: list[ev.ToolCall]) -> list[ev.ToolCall]:
        """Of ``calls`` (the head's calls without a result), those that started acting: their
        outcome is unknown (the executor died meanwhile)."""
        return [call for call in calls if call.id in self.effects]

    def forget_off(self, calls: set[str]) -> None:
        """After a rewind: only the calls of the new path (``calls``) and those cut off by a
        crash (the viewer still shows them) stay. A call made again under an id the
        abandoned branch used is a new call, not one with an unknown outcome."""
        self.effects = {i: e for i, e in self.effects.items() if i in calls or e.cut_off}

    def check_started(
        self, trace_id: str, event: ev.EffectStarted, waiting: list[ev.ToolCall]
    ) -> None:
        """Only a call of the head's tool-call message still without a result starts acting."""
        if event.tool_call_id not in {call.id for call in waiting}:
            raise InvalidTransition(
                f"tool call {event.tool_call_id} of trace {trace_id} is not waiting to run",
                code="conflict",
            )

    def start(self, event: ev.EffectStarted) -> None:
        self.effects[event.tool_call_id] = Effect(started=event)

    def check_resumed(self, trace_id: str, event: ev.EffectResumed) -> None:
        if event.tool_call_id not in self.effects:
            raise InvalidTransition(
                f"tool call {event.tool_call_id} of trace {trace_id} never started an effect",
                code="conflict",
            )

    def resume(self, event: ev.EffectResumed) -> None:
        effect = self.effects[event.tool_call_id]
        effect.resumed.append(event)
        if event.resolution == "run_again":
            effect.decision = None  # used up: cut off again, the person is asked again

    def check_decided(self, trace_id: str, event: ev.ToolDecided) -> None:
        """``took_effect`` answers only a call whose outcome is unknown, and never with
        ``approved`` (a call that took effect is not run again); such a call is run again as
        it was, never with edited arguments."""
        if event.arguments is not None and event.tool_call_id in self.effects:
            raise InvalidTransition(
                f"tool call {event.tool_call_id} of trace {trace_id} may have acted already: "
                "it is run again as it was or not at all, never with edited arguments",
                code="conflict",
            )
        if not event.took_effect:
            return
        effect = self.effects.get(event.tool_call_id)
        if effect is None or not effect.cut_off:
            raise InvalidTransition(
                f"tool call {event.tool_call_id} of trace {trace_id} is not a call whose "
                "outcome is unknown; took_effect answers only those",
                code="conflict",
            )
        if event.approved:
            raise InvalidTransition(
                "took_effect means the call is not run again: send approved false with it",
                code="conflict",
            )

    def decide(self, event: ev.ToolDecided) -> None:
        effect = self.effects.get(event.tool_call_id)
        if effect is not None and effect.cut_off:
            effect.decision = event
