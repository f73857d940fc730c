"""``models.local.tool_prefill`` on the wire: an assistant prefill, last, with ``tool_choice:
required``, on the first tool rounds after a user message only."""

from __future__ import annotations

from typing import Any

from longhaul.llm.providers.openai import OpenAICodec
from longhaul.llm.tool_prefill import ToolPrefill
from longhaul.llm.types import ModelRequest, ToolSpec

PREFILL = "<tool_call>\n"
TOOLS = [ToolSpec(name="read"), ToolSpec(name="write")]
CALL = {"id": "call_1", "type": "function", "function": {"name": "read", "arguments": "{}"}}
ROUND: list[dict[str, Any]] = [
    {"role": "assistant", "content": "", "tool_calls": [CALL]},
    {"role": "tool", "tool_call_id": "call_1", "content": "x"},
]


def body(messages: list[dict[str, Any]], rounds: int = 1, **params: Any) -> dict[str, Any]:
    codec = OpenAICodec(named_tool_choice=False, tool_prefill=ToolPrefill(PREFILL, rounds))
    request = ModelRequest(model="m", messages=messages, tools=params.pop("tools", TOOLS), **params)
    return codec.build("m", request).body


def steered(wire: dict[str, Any]) -> bool:
    last = wire["messages"][-1]
    return last == {"role": "assistant", "content": PREFILL} and wire["tool_choice"] == "required"


def test_the_prefill_goes_last_after_the_volatile_context_with_a_call_required() -> None:
    wire = body([{"role": "user", "content": "hi"}], system_volatile="now", tool_choice="auto")
    assert steered(wire)
    assert wire["messages"][-2]["role"] == "user" and "now" in wire["messages"][-2]["content"]


def test_only_the_first_rounds_after_a_user_message_are_steered() -> None:
    user = [{"role": "user", "content": "hi"}]
    assert not steered(body([*user, *ROUND]))  # after one round the model may answer
    assert steered(body([*user, *ROUND], rounds=2))
    assert not steered(body([*user, *ROUND, *ROUND], rounds=2))
    assert steered(body([*user, *ROUND, {"role": "user", "content": "again"}]))  # a new turn


def test_no_prefill_without_tools_or_when_calls_are_refused() -> None:
    user = [{"role": "user", "content": "hi"}]
    assert body(user, tools=[])["messages"][-1]["role"] == "user"
    assert body(user, tool_choice="none")["messages"][-1]["role"] == "user"
    assert "tool_choice" not in body(user, tools=[])


def test_a_named_choice_keeps_its_one_tool() -> None:
    wire = body([{"role": "user", "content": "hi"}], tool_choice={"name": "write"})
    assert steered(wire)
    assert [tool["function"]["name"] for tool in wire["tools"]] == ["write"]


def test_without_the_setting_nothing_is_added() -> None:
    request = ModelRequest(model="m", messages=[{"role": "user", "content": "hi"}], tools=TOOLS)
    wire = OpenAICodec().build("m", request).body
    assert wire["messages"][-1]["role"] == "user" and "tool_choice" not in wire
