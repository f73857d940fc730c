"""Write-behind, as the engine uses it: a tool's result is handed over with its append left in
flight while the next model request is built and sent, and an assistant message whose calls
have no effects outside the trace (``read_only``) is held while they run and appended with the
first result, in one batch. Each append is settled before a call with effects acts and before
anything else is appended: the order and crash guarantees of a plain ``emit`` (the executor's
sink: tests/unit/executor/test_sink.py)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from longhaul.agent.tools import ToolRegistry, tool
from longhaul.domain import events as ev
from longhaul.domain.state import TraceState
from longhaul.llm.types import ModelRequest

from tests.unit.agent.support import AgentRun, MemorySink, answer, call, calls


def kinds(events: Sequence[ev.TraceEvent]) -> str:
    return ",".join(e.role if isinstance(e, ev.MessageAppended) else e.type for e in events)


class Journal(MemorySink):
    """Applies at once (as the real sink does) and journals what was in flight when."""

    journal: list[str] = []

    def __init__(self, state: TraceState) -> None:
        super().__init__(state)
        self.in_flight = False
        self.held: list[ev.TraceEvent] = []

    async def emit(self, events: Sequence[ev.TraceEvent]) -> None:
        await self._settle_in_flight()
        held, self.held = self.held, []
        self.journal.append(f"emit {kinds([*held, *events])}")
        await super().emit(events)

    async def emit_behind(self, events: Sequence[ev.TraceEvent]) -> None:
        await self._settle_in_flight()
        held, self.held = self.held, []
        await super().emit(events)
        self.in_flight = True
        self.journal.append(f"behind {kinds([*held, *events])}")

    async def hold(self, events: Sequence[ev.TraceEvent]) -> None:
        await self._settle_in_flight()
        await super().emit(events)
        self.held.extend(events)
        self.journal.append(f"held {kinds(events)}")

    async def settle(self) -> None:
        await self._settle_in_flight()
        if self.held:
            self.journal.append(f"emit {kinds(self.held)}")
            self.held = []

    async def _settle_in_flight(self) -> None:
        if self.in_flight:
            self.in_flight = False
            self.journal.append("settled")


@tool(read_only=True)
async def look(n: int) -> str:
    """Journal that this call acts now; it changes nothing outside the trace (tests).

    Args:
        n: which call.
    """
    Journal.journal.append(f"tool {n}")
    return f"call {n} done"


@tool
async def act(n: int) -> str:
    """Journal that this call acts now; it has effects (tests).

    Args:
        n: which call.
    """
    Journal.journal.append(f"tool {n}")
    return f"call {n} done"


def model_call(reply: dict[str, Any]) -> Any:
    def respond(request: ModelRequest) -> dict[str, Any]:
        Journal.journal.append("model")
        return reply

    return respond


async def turn_of(tmp_path: Path, *replies: dict[str, Any]) -> AgentRun:
    Journal.journal = []
    run = AgentRun(tmp_path, sink=Journal, tools=ToolRegistry([look, act]))
    outcome = await run.turn(*(model_call(reply) for reply in replies))
    assert outcome.end == "completed"
    return run


async def test_a_call_with_effects_acts_only_once_everything_before_it_is_in_the_log(
    tmp_path: Path,
) -> None:
    run = await turn_of(
        tmp_path,
        calls(call("act", {"n": 0}), call("act", {"n": 1})),
        calls(call("act", {"n": 2})),
        answer("done"),
    )
    assert Journal.journal == [
        "model",
        "emit assistant",  # the calls are recorded before any of them acts
        "emit effect_started",  # the ledger: durably before the call acts
        "tool 0",
        "behind tool",
        "settled",  # before the second call acts
        "emit effect_started",
        "tool 1",
        "behind tool",
        "model",  # the next request is built and sent while the result is in flight
        "settled",
        "emit assistant",
        "emit effect_started",
        "tool 2",
        "behind tool",
        "model",
        "settled",
        "emit assistant",
        "emit completed",
    ]
    roles = [run.state.messages[seq].role for seq in run.state.path]
    assert roles == ["user", "assistant", "tool", "tool", "assistant", "tool", "assistant"]


async def test_calls_without_effects_act_before_their_message_goes_with_the_first_result(
    tmp_path: Path,
) -> None:
    await turn_of(tmp_path, calls(call("look", {"n": 0}), call("look", {"n": 1})), answer("done"))
    assert Journal.journal == [
        "model",
        "held assistant",
        "tool 0",
        "behind assistant,tool",  # one batch: one round trip for the message and its result
        "tool 1",
        "settled",
        "behind tool",
        "model",
        "settled",
        "emit assistant",
        "emit completed",
    ]


async def test_one_call_with_effects_keeps_the_message_ahead_of_every_call(
    tmp_path: Path,
) -> None:
    await turn_of(tmp_path, calls(call("look", {"n": 0}), call("act", {"n": 1})), answer("done"))
    assert Journal.journal[:8] == [
        "model",
        "emit assistant",
        "tool 0",
        "behind tool",
        "settled",
        "emit effect_started",
        "tool 1",
        "behind tool",
    ]


async def test_a_plain_sink_appends_every_result_at_once(tmp_path: Path) -> None:
    run = AgentRun(tmp_path, tools=ToolRegistry([look]))
    outcome = await run.turn(calls(call("look", {"n": 0})), answer("done"))
    assert outcome.end == "completed"
    assert [kinds(batch) for batch in run.sink.batches] == [
        "assistant",
        "tool",
        "assistant",
        "completed",
    ]
