"""ToolSchemaValidation: invalid arguments never reach the tool and come back typed."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from longhaul.agent import ToolRegistry, tool
from longhaul.domain import events as ev

from tests.unit.agent.support import (
    MemorySink,
    answer,
    call,
    calls,
    make_engine,
    new_state,
    scripted,
)

RUNS: list[dict] = []


@tool
async def add(a: int, b: int = 0) -> str:
    """Add two integers.

    Args:
        a: first addend.
        b: second addend.
    """
    RUNS.append({"a": a, "b": b})
    return str(a + b)


@pytest.fixture(autouse=True)
def _clear() -> None:
    RUNS.clear()


def tool_results(sink: MemorySink) -> list[ev.MessageAppended]:
    return [m for m in sink.of_type(ev.MessageAppended) if m.role == "tool"]


@pytest.mark.parametrize(
    ("arguments", "code", "detail"),
    [
        ({"a": "three"}, "tool_call_invalid", "$.a: 'three' is not of type 'integer'"),
        ({"a": 1, "b": [2]}, "tool_call_invalid", "$.b"),
        ('{"a": 1,', "tool_call_invalid", "not a JSON object"),
        ("[1, 2]", "tool_call_invalid", "not a JSON object"),
        ({}, "schema_mismatch", "'a' is a required property"),
        ({"a": 1, "c": 2}, "schema_mismatch", "Additional properties are not allowed"),
    ],
)
async def test_invalid_arguments_never_reach_the_tool(
    tmp_path: Path, arguments: dict | str, code: str, detail: str
) -> None:
    model, _ = scripted(calls(call("add", arguments, id="c1")), answer("gave up"))
    state = new_state()
    sink = MemorySink(state)
    await make_engine(tmp_path, tools=ToolRegistry([add])).run_turn(state, sink, model=model)
    [result] = tool_results(sink)
    assert RUNS == []
    assert result.error_code == code
    assert detail in str(result.content)


async def test_the_corrected_retry_succeeds(tmp_path: Path) -> None:
    model, script = scripted(
        calls(call("add", {"a": "1", "b": 2}, id="bad")),
        calls(call("add", {"a": 1, "b": 2}, id="good")),
        answer("3"),
    )
    state = new_state()
    sink = MemorySink(state)
    outcome = await make_engine(tmp_path, tools=ToolRegistry([add])).run_turn(
        state, sink, model=model
    )
    first, second = tool_results(sink)
    assert first.error_code == "tool_call_invalid" and "Expected schema" in str(first.content)
    assert second.error_code is None and second.content == "3"
    assert RUNS == [{"a": 1, "b": 2}] and outcome.end == "completed"
    # The model saw the typed error before retrying.
    assert script.requests[1].messages[-1]["content"].startswith("Error (tool_call_invalid)")


async def test_unknown_tool_is_reported_with_the_available_ones(tmp_path: Path) -> None:
    model, _ = scripted(calls(call("nope", {})), answer("ok"))
    state = new_state()
    sink = MemorySink(state)
    await make_engine(tmp_path, tools=ToolRegistry([add])).run_turn(state, sink, model=model)
    [result] = tool_results(sink)
    assert result.error_code == "unknown_tool" and "available: add" in str(result.content)


async def test_a_tool_schema_pattern_cannot_freeze_the_loop(tmp_path: Path) -> None:
    """A tool schema (an MCP server's, say) with ``(a+)+$``: Python's ``re`` would take hours
    on these forty a's, on the executor's event loop. RE2 answers at once."""

    @tool
    async def tag(label: str) -> str:
        """Tag something.

        Args:
            label: the label.
        """
        RUNS.append({"label": label})
        return label

    hostile = replace(
        tag,
        input_schema={
            **tag.input_schema,
            "properties": {"label": {"type": "string", "pattern": "(a+)+$"}},
        },
    )
    model, _ = scripted(calls(call("tag", {"label": "a" * 40 + "!"}, id="c1")), answer("ok"))
    state = new_state()
    sink = MemorySink(state)
    await make_engine(tmp_path, tools=ToolRegistry([hostile])).run_turn(state, sink, model=model)
    [result] = tool_results(sink)
    assert RUNS == [] and result.error_code == "tool_call_invalid"
    assert "does not match" in str(result.content)
