"""The anthropic: provider against a strict fake Messages API on loopback."""

from __future__ import annotations

import json

import httpx
import pytest
from longhaul.llm import (
    ModelError,
    ModelRegistry,
    ModelRequest,
    RetryNotice,
    TextDelta,
    ToolSpec,
)

from tests.support.llm_fakes import Break, Call, Fail, FakeAnthropic, Reply, Step
from tests.unit.llm.conftest import drain

TOOLS = [
    ToolSpec(
        name="search",
        description="web search",
        parameters={"type": "object", "properties": {"q": {"type": "string"}}},
    )
]


def openai_history() -> list[dict[str, object]]:
    """A conversation recorded from an OpenAI model: two parallel calls, then a user nudge."""
    return [
        {"role": "system", "content": "You are careful."},
        {"role": "user", "content": "compare a and b"},
        {
            "role": "assistant",
            "content": "Looking both up.",
            "tool_calls": [
                {
                    "id": "call_AAA",
                    "type": "function",
                    "function": {"name": "search", "arguments": '{"q": "a"}'},
                },
                {
                    "id": "call_BBB",
                    "type": "function",
                    "function": {"name": "search", "arguments": '{"q": "b"}'},
                },
            ],
        },
        {"role": "tool", "tool_call_id": "call_BBB", "content": "b is blue"},
        {
            "role": "tool",
            "tool_call_id": "call_AAA",
            "content": "no such page",
            "error": "not_found",
        },
        {"role": "user", "content": "be brief"},
    ]


def request(**kwargs: object) -> ModelRequest:
    defaults: dict[str, object] = {
        "model": "anthropic:claude-sonnet-4-5",
        "messages": openai_history(),
        "tools": TOOLS,
        "system_stable": "STABLE RULES",
        "system_volatile": "TIME",
    }
    return ModelRequest(**(defaults | kwargs))  # type: ignore[arg-type]


async def test_request_shape_passes_the_strict_fake(registry: ModelRegistry) -> None:
    reply = Reply(
        text="a: none; b: blue",
        prompt_tokens=1000,
        cached_tokens=800,
        cache_write_tokens=150,
        completion_tokens=9,
    )
    async with FakeAnthropic([reply], require_cached_system=True) as server:
        model = registry.resolve("anthropic:claude-sonnet-4-5", server.models_config())
        events = await drain(model, request())
    sent = server.requests[0]
    assert sent.headers["x-api-key"] == "test-key"
    assert sent.headers["anthropic-version"] == "2023-06-01"
    body = sent.json
    assert body["max_tokens"] == 4096
    # Only stable text in the system prompt; breakpoints on tools, system and the last two
    # user turns (Anthropic's maximum of 4); the volatile note after all of them.
    assert body["system"] == [
        {
            "type": "text",
            "text": "STABLE RULES\n\nYou are careful.",
            "cache_control": {"type": "ephemeral"},
        },
    ]
    assert body["tools"] == [
        {
            "name": "search",
            "description": "web search",
            "input_schema": TOOLS[0].parameters,
            "cache_control": {"type": "ephemeral"},
        }
    ]
    assert body["messages"][0]["content"][-1]["cache_control"] == {"type": "ephemeral"}
    assistant, grouped = body["messages"][1], body["messages"][2]
    first_id, second_id = (block["id"] for block in assistant["content"][1:])
    assert first_id.startswith("toolu_") and second_id.startswith("toolu_")
    assert assistant["content"][1]["input"] == {"q": "a"}
    assert grouped == {
        "role": "user",
        "content": [
            {
                "type": "tool_result",
                "tool_use_id": first_id,
                "content": "no such page",
                "is_error": True,
            },
            {"type": "tool_result", "tool_use_id": second_id, "content": "b is blue"},
            {"type": "text", "text": "be brief", "cache_control": {"type": "ephemeral"}},
            {"type": "text", "text": "<context>\nTIME\n</context>"},
        ],
    }
    response = events[-1].response  # type: ignore[union-attr]
    assert response.content == "a: none; b: blue"
    usage = response.usage
    assert (
        usage.prompt_tokens,
        usage.cache_read_tokens,
        usage.cache_write_tokens,
        usage.completion_tokens,
    ) == (1000, 800, 150, 9)


async def test_no_cache_control_when_caching_is_off(registry: ModelRegistry) -> None:
    async with FakeAnthropic([Reply(text="ok")]) as server:
        model = registry.resolve("anthropic:claude-sonnet-4-5", server.models_config())
        await model.complete(request(cache_system=False))
    assert all("cache_control" not in block for block in server.requests[0].json["system"])


async def test_the_fake_rejects_ungrouped_results_and_misplaced_cache_control() -> None:
    ungrouped = {
        "model": "m",
        "max_tokens": 10,
        "system": [{"type": "text", "text": "S", "cache_control": {"type": "ephemeral"}}],
        "messages": [
            {"role": "user", "content": "go"},
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": "toolu_1", "name": "x", "input": {}}],
            },
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "first"},
                    {"type": "tool_result", "tool_use_id": "toolu_1"},
                ],
            },
        ],
    }
    misplaced = {
        "model": "m",
        "max_tokens": 10,
        "messages": [{"role": "user", "content": "x"}],
        "system": [
            {"type": "text", "text": "S"},
            {"type": "text", "text": "V", "cache_control": {"type": "ephemeral"}},
        ],
    }
    async with FakeAnthropic(require_cached_system=True) as server:
        headers = {"x-api-key": server.api_key, "anthropic-version": "2023-06-01"}
        async with httpx.AsyncClient(base_url=server.base_url, headers=headers) as client:
            first = await client.post("/v1/messages", json=ungrouped)
            second = await client.post("/v1/messages", json=misplaced)
    assert first.status_code == 400
    assert first.json()["error"]["type"] == "invalid_request_error"
    assert (
        "`tool_use` ids were found without `tool_result` blocks immediately after: toolu_1"
        in first.json()["error"]["message"]
    )
    assert second.status_code == 400 and "cache_control" in second.json()["error"]["message"]


async def test_unpaired_tool_use_surfaces_the_real_400(registry: ModelRegistry) -> None:
    history = [*openai_history()[:3], {"role": "user", "content": "never mind"}]
    async with FakeAnthropic([Reply(text="x")]) as server:
        model = registry.resolve("anthropic:claude-sonnet-4-5", server.models_config())
        with pytest.raises(ModelError, match="ids were found without `tool_result` blocks") as e:
            await model.complete(request(messages=history))
    assert e.value.status == 400 and len(server.requests) == 1


async def test_tool_use_streams_and_thinking_round_trips(registry: ModelRegistry) -> None:
    first = Reply(
        thinking="I should search.",
        text="Searching.",
        chunk=2,
        tool_calls=[Call("search", {"q": "weather in Paris"})],
    )
    async with FakeAnthropic([first, Reply(text="Sunny.")]) as server:
        model = registry.resolve("anthropic:claude-opus-4-1", server.models_config())
        conversation: list[dict[str, object]] = [{"role": "user", "content": "weather?"}]
        response = await model.complete(request(messages=conversation))
        [call] = response.tool_calls
        assert call.id.startswith("toolu_01") and json.loads(call.arguments) == {
            "q": "weather in Paris"
        }
        assert response.finish_reason == "tool_calls"
        thinking = response.provider_fields["anthropic"]["thinking"]
        assert thinking[0]["thinking"] == "I should search."
        assert thinking[0]["signature"].startswith("sig-")
        conversation += [
            response.to_message(),
            {"role": "tool", "tool_call_id": call.id, "content": "sunny"},
        ]
        await model.complete(request(messages=conversation))
    replayed = server.requests[1].json["messages"][1]["content"]
    assert [block["type"] for block in replayed] == ["thinking", "text", "tool_use"]
    assert replayed[0] == thinking[0]
    assert replayed[2]["id"] == call.id


async def test_overloaded_event_before_output_is_retried_after_output_is_not(
    registry: ModelRegistry,
) -> None:
    script: list[Step] = [
        Break(text="", mode="error_event"),
        Fail(529, "Overloaded"),
        Reply(text="fine"),
        Break(text="some text", mode="error_event"),
    ]
    async with FakeAnthropic(script) as server:
        model = registry.resolve("anthropic:claude-sonnet-4-5", server.models_config())
        events = await drain(model, request())
        assert [e.attempt for e in events if isinstance(e, RetryNotice)] == [1, 2]
        assert events[-1].response.content == "fine"  # type: ignore[union-attr]
        seen = []
        with pytest.raises(ModelError, match="overloaded_error") as caught:
            async for event in model.stream(request()):
                seen.append(event)
    assert caught.value.partial_output
    assert "".join(e.text for e in seen if isinstance(e, TextDelta)) == "some text"
    assert len(server.requests) == 4


async def test_response_schema_becomes_an_instruction(registry: ModelRegistry) -> None:
    schema = {"type": "object", "properties": {"verdict": {"type": "string"}}}
    async with FakeAnthropic([Reply(text='{"verdict": "ok"}')]) as server:
        model = registry.resolve("anthropic:claude-sonnet-4-5", server.models_config())
        await model.complete(request(response_schema=schema, max_tokens=200))
    body = server.requests[0].json
    assert body["max_tokens"] == 200
    last = body["messages"][-1]["content"][-1]["text"]  # after the conversation, uncached
    assert '"verdict"' in last and last.startswith("<context>")


async def test_consecutive_calls_reuse_one_connection(registry: ModelRegistry) -> None:
    async with FakeAnthropic([Reply(text="one"), Reply(text="two")]) as server:
        model = registry.resolve("anthropic:claude-sonnet-4", server.models_config())
        first = await model.complete(request())
        second = await model.complete(request())
    assert (first.content, second.content) == ("one", "two")
    assert server.connections == 1
