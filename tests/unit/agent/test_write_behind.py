"""Write-behind, as the engine uses it: a tool's result is handed over with its append left in
flight, the next model request is built and sent meanwhile, and the append is settled before
the next tool acts or anything else is appended (the order and crash guarantees of a plain
``emit``; the executor's sink is tested in tests/unit/executor/test_sink.py)."""

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

    async def emit(self, events: Sequence[ev.TraceEvent]) -> None:
        await self.settle()
        self.journal.append(f"emit {kinds(events)}")
        await super().emit(events)

    async def emit_behind(self, events: Sequence[ev.TraceEvent]) -> None:
        await self.settle()
        await super().emit(events)
        self.in_flight = True
        self.journal.append(f"behind {kinds(events)}")

    async def settle(self) -> None:
        if self.in_flight:
            self.in_flight = False
            self.journal.append("settled")


@tool(read_only=True)
async def mark(n: int) -> str:
    """Journal that this call acts now (tests).

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


async def test_results_are_in_flight_only_while_the_model_is_called(tmp_path: Path) -> None:
    Journal.journal = []
    run = AgentRun(tmp_path, sink=Journal, tools=ToolRegistry([mark]))
    outcome = await run.turn(
        model_call(calls(call("mark", {"n": 0}), call("mark", {"n": 1}))),
        model_call(calls(call("mark", {"n": 2}))),
        model_call(answer("done")),
    )
    assert outcome.end == "completed"
    assert Journal.journal == [
        "model",
        "emit assistant",
        "tool 0",
        "behind tool",
        "settled",  # before the second call acts
        "tool 1",
        "behind tool",
        "model",  # the next request is built and sent while the result is in flight
        "settled",
        "emit assistant",
        "tool 2",
        "behind tool",
        "model",
        "settled",
        "emit assistant",
        "emit completed",
    ]
    roles = [run.state.messages[seq].role for seq in run.state.path]
    assert roles == ["user", "assistant", "tool", "tool", "assistant", "tool", "assistant"]


async def test_a_plain_sink_appends_every_result_at_once(tmp_path: Path) -> None:
    run = AgentRun(tmp_path, tools=ToolRegistry([mark]))
    outcome = await run.turn(calls(call("mark", {"n": 0})), answer("done"))
    assert outcome.end == "completed"
    assert [kinds(batch) for batch in run.sink.batches] == [
        "assistant",
        "tool",
        "assistant",
        "completed",
    ]
