"""Assertions shared by executor and chaos tests: the message tree and tool executions."""

from __future__ import annotations

import asyncio
import itertools
import json
from pathlib import Path
from typing import Any

from longhaul.domain.state import TraceState

from tests.support.stack import eventually


def executions(log: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in log.read_text().splitlines()]


def assert_tree_intact(state: TraceState, steps: int) -> None:
    """No lost, duplicated or unpaired message."""
    assert sorted(state.messages) == list(range(1, state.last_sequence + 1))
    parents = [None, *state.path[:-1]]
    assert [m.parent_sequence for m in state.main_path()] == parents
    # The engine's periodic context reminders are the only other messages on the path.
    path = [m for m in state.main_path() if not (m.synthetic and m.name == "context")]
    assert [m.role for m in path] == ["user"] + ["assistant", "tool"] * steps + ["assistant"]
    recorded_steps = []
    for assistant, result in zip(path[1:-1:2], path[2:-1:2], strict=True):
        assert assistant.tool_calls and len(assistant.tool_calls) == 1
        assert result.tool_call_id == assistant.tool_calls[0].id
        recorded_steps.append(json.loads(assistant.tool_calls[0].function.arguments)["step"])
    assert recorded_steps == list(range(steps))
    answered = [m.tool_call_id for m in state.messages.values() if m.role == "tool"]
    assert len(answered) == len(set(answered)), "a tool call answered twice"


def assert_never_concurrent(
    runs: list[dict[str, Any]], killed: dict[int, float] | None = None
) -> None:
    """Per trace, executions by different processes never overlap in time. A killed process's
    unfinished execution lasts until its kill time (``killed``: pid -> time)."""
    killed = killed or {}
    spans: dict[tuple[str, str, int], list[float]] = {}
    for run in runs:
        key = (run["trace"], run["key"], run["pid"])
        if run["phase"] == "start":
            spans[key] = [run["t"], killed.get(run["pid"], float("inf"))]
        else:
            spans[key][1] = run["t"]
    by_trace: dict[str, list[tuple[float, float, int]]] = {}
    for (trace, _, pid), (start, end) in spans.items():
        by_trace.setdefault(trace, []).append((start, end, pid))
    for trace, intervals in by_trace.items():
        intervals.sort()
        for (_s1, e1, p1), (s2, _e2, p2) in itertools.pairwise(intervals):
            assert p1 == p2 or e1 <= s2, f"{trace}: pid {p1} ran until {e1}, pid {p2} from {s2}"


async def step_started(log: Path, step: int, *, within: float) -> dict[str, Any]:
    """The log line of ``step``'s first start (a file: nothing to watch, so it is polled)."""

    def read() -> str:
        return log.read_text() if log.exists() else ""

    async def probe() -> dict[str, Any] | None:
        text = await asyncio.to_thread(read)
        complete = text[: text.rfind("\n") + 1].splitlines()
        runs = [json.loads(line) for line in complete]
        return next((r for r in runs if r["phase"] == "start" and r["step"] == step), None)

    return await eventually(probe, within=within)
