"""Each provider maps ModelParams to its own wire format."""

from __future__ import annotations

from typing import Any

import pytest
from longhaul.llm.providers.anthropic import AnthropicCodec
from longhaul.llm.providers.gemini import GeminiCodec
from longhaul.llm.providers.openai import OpenAICodec
from longhaul.llm.types import ModelRequest, ToolSpec

TOOLS = [ToolSpec(name="read"), ToolSpec(name="write")]


def request(**params: Any) -> ModelRequest:
    return ModelRequest(
        model="m", messages=[{"role": "user", "content": "hi"}], tools=TOOLS, **params
    )


@pytest.mark.parametrize(
    ("choice", "openai", "anthropic", "gemini"),
    [
        ("auto", "auto", {"type": "auto"}, {"mode": "AUTO"}),
        ("required", "required", {"type": "any"}, {"mode": "ANY"}),
        ("none", "none", {"type": "none"}, {"mode": "NONE"}),
        (
            {"name": "write"},
            {"type": "function", "function": {"name": "write"}},
            {"type": "tool", "name": "write"},
            {"mode": "ANY", "allowedFunctionNames": ["write"]},
        ),
    ],
)
def test_tool_choice(choice: Any, openai: Any, anthropic: Any, gemini: Any) -> None:
    assert OpenAICodec().build("m", request(tool_choice=choice)).body["tool_choice"] == openai
    assert AnthropicCodec().build("m", request(tool_choice=choice)).body["tool_choice"] == (
        anthropic
    )
    body = GeminiCodec().build("m", request(tool_choice=choice)).body
    assert body["toolConfig"]["functionCallingConfig"] == gemini


def test_named_choice_for_servers_that_only_take_strings_narrows_the_tools() -> None:
    body = (
        OpenAICodec(named_tool_choice=False).build("m", request(tool_choice={"name": "write"})).body
    )
    assert body["tool_choice"] == "required"
    assert [tool["function"]["name"] for tool in body["tools"]] == ["write"]


def test_sampling_params() -> None:
    params = {"temperature": 0.5, "top_p": 0.9, "seed": 3, "stop": ["END"], "max_tokens": 7}
    openai = OpenAICodec().build("m", request(**params)).body
    assert {k: openai[k] for k in ("temperature", "top_p", "seed", "stop", "max_tokens")} == (
        params
    )
    anthropic = AnthropicCodec().build("m", request(**params)).body
    assert (anthropic["top_p"], anthropic["stop_sequences"], anthropic["max_tokens"]) == (
        0.9,
        ["END"],
        7,
    )
    assert "seed" not in anthropic  # the Messages API has none
    gemini = GeminiCodec().build("m", request(**params)).body["generationConfig"]
    assert (gemini["topP"], gemini["seed"], gemini["stopSequences"], gemini["maxOutputTokens"]) == (
        0.9,
        3,
        ["END"],
        7,
    )


def test_unparseable_arguments_go_back_to_openai_servers_as_an_object() -> None:
    history: list[dict[str, Any]] = [
        {"role": "user", "content": "hi"},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "write", "arguments": '{"path": "a'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "invalid"},
    ]
    body = OpenAICodec().build("m", ModelRequest(model="m", messages=history)).body
    assert body["messages"][1]["tool_calls"][0]["function"]["arguments"] == (
        '{"_raw_arguments": "{\\"path\\": \\"a"}'
    )


def test_cache_prompt_is_sent_only_to_llama_cpp() -> None:
    """``local:`` models (llama.cpp's server) get ``cache_prompt``; OpenAI itself never does."""
    assert OpenAICodec(cache_prompt=True).build("m", request()).body["cache_prompt"] is True
    assert "cache_prompt" not in OpenAICodec().build("m", request()).body
