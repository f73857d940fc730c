"""The openai: provider against a fake Chat Completions server on loopback."""

from __future__ import annotations

import json

import pytest
from longhaul.llm import (
    InvalidToolArguments,
    ModelError,
    ModelRegistry,
    ModelRequest,
    RetryNotice,
    StreamEnd,
    TextDelta,
    ToolCallDelta,
    ToolSpec,
    parse_arguments,
)

from tests.support.llm_fakes import Break, Call, Fail, FakeOpenAI, Reply, Step
from tests.unit.llm.conftest import SleepRecorder, drain

TOOLS = [
    ToolSpec(
        name="search",
        parameters={"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]},
    ),
    ToolSpec(name="read", parameters={"type": "object", "properties": {}}),
]


def request(**kwargs: object) -> ModelRequest:
    defaults: dict[str, object] = {
        "model": "openai:gpt-4o",
        "messages": [{"role": "user", "content": "hi"}],
    }
    return ModelRequest(**(defaults | kwargs))  # type: ignore[arg-type]


async def test_text_streams_as_deltas_and_usage_maps_cached_tokens(registry: ModelRegistry) -> None:
    async with FakeOpenAI(
        [
            Reply(
                text="Hello there, world",
                chunk=3,
                prompt_tokens=50,
                completion_tokens=7,
                cached_tokens=32,
            )
        ]
    ) as server:
        model = registry.resolve("openai:gpt-4o", server.models_config())
        events = await drain(model, request(system_stable="STABLE", system_volatile="NOW"))
    texts = [e.text for e in events if isinstance(e, TextDelta)]
    assert texts == ["Hel", "lo ", "the", "re,", " wo", "rld"]
    end = events[-1]
    assert isinstance(end, StreamEnd)
    assert end.response.content == "Hello there, world"
    assert end.response.finish_reason == "stop"
    usage = end.response.usage
    assert (usage.prompt_tokens, usage.completion_tokens, usage.cache_read_tokens) == (50, 7, 32)
    assert not usage.estimated
    body = server.requests[0].json
    assert body["model"] == "gpt-4o"
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True}
    # The system prompt is stable; the volatile note comes after the conversation.
    assert body["messages"][0] == {"role": "system", "content": "STABLE"}
    assert body["messages"][1] == {"role": "user", "content": "hi"}
    assert body["messages"][-1] == {"role": "user", "content": "<context>\nNOW\n</context>"}


async def test_tool_call_arguments_split_across_many_chunks(registry: ModelRegistry) -> None:
    arguments = {"q": "a fairly long query string", "page": 2}
    async with FakeOpenAI([Reply(tool_calls=[Call("search", arguments)], chunk=1)]) as server:
        model = registry.resolve("openai:gpt-4o", server.models_config())
        events = await drain(model, request(tools=TOOLS))
    fragments = [e for e in events if isinstance(e, ToolCallDelta)]
    assert len(fragments) > 20
    assert fragments[0].name == "search" and fragments[0].id is not None
    response = events[-1].response  # type: ignore[union-attr]
    assert response.finish_reason == "tool_calls"
    [call] = response.tool_calls
    assert call.id == fragments[0].id
    assert parse_arguments(call.arguments) == arguments
    assert server.requests[0].json["tools"][0]["function"]["name"] == "search"


async def test_two_parallel_tool_calls(registry: ModelRegistry) -> None:
    calls = [Call("search", {"q": "one"}), Call("read", {})]
    async with FakeOpenAI([Reply(text="Let me look.", tool_calls=calls)]) as server:
        model = registry.resolve("openai:gpt-4o", server.models_config())
        response = await model.complete(request(tools=TOOLS))
    assert response.content == "Let me look."
    assert [(c.name, json.loads(c.arguments)) for c in response.tool_calls] == [
        ("search", {"q": "one"}),
        ("read", {}),
    ]
    assert len({c.id for c in response.tool_calls}) == 2


async def test_server_reusing_index_zero_with_new_ids(registry: ModelRegistry) -> None:
    calls = [Call("search", {"q": "one"}, id="call_a"), Call("search", {"q": "two"}, id="call_b")]
    async with FakeOpenAI([Reply(tool_calls=calls, reuse_index_zero=True)]) as server:
        model = registry.resolve("openai:gpt-4o", server.models_config())
        events = await drain(model, request(tools=TOOLS))
    indices = {e.index for e in events if isinstance(e, ToolCallDelta)}
    assert indices == {0, 1}
    response = events[-1].response  # type: ignore[union-attr]
    assert [(c.id, json.loads(c.arguments)["q"]) for c in response.tool_calls] == [
        ("call_a", "one"),
        ("call_b", "two"),
    ]


async def test_stream_without_usage_chunk_gets_estimated_usage(registry: ModelRegistry) -> None:
    async with FakeOpenAI([Reply(text="x" * 40, usage=False)]) as server:
        model = registry.resolve("openai:gpt-4o", server.models_config())
        response = await model.complete(request())
    assert response.usage.estimated
    assert response.usage.completion_tokens == 10
    assert response.usage.prompt_tokens > 0


async def test_non_json_arguments_are_kept_raw(registry: ModelRegistry) -> None:
    async with FakeOpenAI([Reply(tool_calls=[Call("search", '{"q": "unterminated')])]) as server:
        model = registry.resolve("openai:gpt-4o", server.models_config())
        response = await model.complete(request(tools=TOOLS))
    [call] = response.tool_calls
    assert call.arguments == '{"q": "unterminated'
    with pytest.raises(InvalidToolArguments) as caught:
        parse_arguments(call.arguments)
    assert caught.value.raw == call.arguments


async def test_history_with_tool_results_round_trips(registry: ModelRegistry) -> None:
    history = [
        {"role": "user", "content": "find it"},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {
                    "id": "toolu_01ABCdef",
                    "type": "function",
                    "function": {"name": "search", "arguments": '{"q": "it"}'},
                }
            ],
            "provider_fields": {"anthropic": {"thinking": [{"type": "thinking"}]}},
        },
        {"role": "tool", "tool_call_id": "toolu_01ABCdef", "content": "found", "goal_id": "g1"},
    ]
    async with FakeOpenAI([Reply(text="done")]) as server:
        model = registry.resolve("openai:gpt-4o", server.models_config())
        await model.complete(request(messages=history, tools=TOOLS))
    sent = server.requests[0].json["messages"]
    call_id = sent[1]["tool_calls"][0]["id"]
    assert call_id.startswith("call_") and len(call_id) <= 40
    assert sent[2] == {"role": "tool", "tool_call_id": call_id, "content": "found"}
    assert "provider_fields" not in sent[1]


async def test_unpaired_tool_calls_get_the_real_400_and_no_retry(registry: ModelRegistry) -> None:
    history = [
        {"role": "user", "content": "go"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "read", "arguments": "{}"},
                }
            ],
        },
        {"role": "user", "content": "and?"},
    ]
    async with FakeOpenAI([Reply(text="unreachable")]) as server:
        model = registry.resolve("openai:gpt-4o", server.models_config())
        with pytest.raises(ModelError) as caught:
            await model.complete(request(messages=history))
    assert caught.value.status == 400 and not caught.value.retryable
    assert "must be followed by tool messages responding to each 'tool_call_id'" in str(
        caught.value
    )
    assert len(server.requests) == 1


async def test_401_is_not_retried(registry: ModelRegistry) -> None:
    async with FakeOpenAI([Reply(text="x")]) as server:
        config = server.models_config()
        config.providers["openai"].api_key = None
        model = registry.resolve("openai:gpt-4o", config)
        with pytest.raises(ModelError, match="Incorrect API key") as caught:
            await model.complete(request())
    assert caught.value.status == 401
    assert len(server.requests) == 1


async def test_429_with_retry_after_is_honoured(registry: ModelRegistry) -> None:
    script: list[Step] = [
        Fail(429, "Rate limit reached", headers={"retry-after": "0.2"}),
        Reply(text="ok"),
    ]
    async with FakeOpenAI(script) as server:
        model = registry.resolve("openai:gpt-4o", server.models_config())
        sleeper = SleepRecorder().install(model)
        events = await drain(model, request())
    notices = [e for e in events if isinstance(e, RetryNotice)]
    assert notices == [
        RetryNotice(attempt=1, delay_s=0.2, reason="rate limited (429), retrying in 0.2 s")
    ]
    assert events.index(notices[0]) == 0
    assert sleeper.delays == [0.2]
    assert len(server.requests) == 2
    assert events[-1].response.content == "ok"  # type: ignore[union-attr]


async def test_retry_after_ms_and_server_errors_before_output_are_retried(
    registry: ModelRegistry,
) -> None:
    script: list[Step] = [
        Fail(503, "busy", headers={"retry-after-ms": "30"}),
        Fail(500),
        Break(text=""),
        Reply(text="finally"),
    ]
    async with FakeOpenAI(script) as server:
        model = registry.resolve("openai:gpt-4o", server.models_config())
        sleeper = SleepRecorder().install(model)
        events = await drain(model, request())
    notices = [e for e in events if isinstance(e, RetryNotice)]
    assert [n.attempt for n in notices] == [1, 2, 3]
    assert notices[0].delay_s == 0.03 and notices[0].reason.startswith("server error (503)")
    assert notices[2].reason.startswith("connection error")
    assert sleeper.delays[0] == 0.03 and all(d <= 0.01 for d in sleeper.delays[1:])
    assert len(server.requests) == 4
    assert events[-1].response.content == "finally"  # type: ignore[union-attr]


@pytest.mark.parametrize("mode", ["drop", "error_event"])
async def test_failure_after_streamed_text_is_not_retried(
    registry: ModelRegistry, mode: str
) -> None:
    async with FakeOpenAI([Break(text="half an ans", mode=mode), Reply(text="never")]) as server:  # type: ignore[arg-type]
        model = registry.resolve("openai:gpt-4o", server.models_config())
        seen = []
        with pytest.raises(ModelError) as caught:
            async for event in model.stream(request()):
                seen.append(event)
    assert "".join(e.text for e in seen if isinstance(e, TextDelta)) == "half an ans"
    assert not any(isinstance(e, RetryNotice) for e in seen)
    assert caught.value.partial_output
    assert len(server.requests) == 1


async def test_retries_give_up_with_the_last_error(registry: ModelRegistry) -> None:
    async with FakeOpenAI([Fail(500, "boom")] * 3) as server:
        model = registry.resolve("openai:gpt-4o", server.models_config(max_retries=2))
        with pytest.raises(ModelError, match="boom") as caught:
            await model.complete(request())
    assert caught.value.status == 500 and caught.value.retryable
    assert len(server.requests) == 3


async def test_connection_refused_is_retried_then_fails(registry: ModelRegistry) -> None:
    async with FakeOpenAI() as server:
        config = server.models_config(max_retries=1)
    model = registry.resolve("openai:gpt-4o", config)
    events = []
    with pytest.raises(ModelError, match="connection error"):
        async for event in model.stream(request()):
            events.append(event)
    assert [type(e) for e in events] == [RetryNotice]


async def test_request_options_map_to_the_wire(registry: ModelRegistry) -> None:
    schema = {"type": "object", "properties": {"ok": {"type": "boolean"}}}
    async with FakeOpenAI([Reply(text="{}"), Reply(text="{}")]) as server:
        config = server.models_config()
        await registry.resolve("openai:gpt-4o", config).complete(
            request(temperature=0.2, max_tokens=99, response_schema=schema)
        )
        await registry.resolve("openai:o3-mini", config).complete(request(max_tokens=50))
    first, second = (r.json for r in server.requests)
    assert first["temperature"] == 0.2 and first["max_tokens"] == 99
    assert first["response_format"]["json_schema"]["schema"] == schema
    assert second["max_completion_tokens"] == 50 and "max_tokens" not in second


async def test_clients_are_shared_per_provider(registry: ModelRegistry) -> None:
    async with FakeOpenAI([Reply(text="a"), Reply(text="b")]) as server:
        config = server.models_config()
        first = registry.resolve("openai:gpt-4o", config)
        second = registry.resolve("openai:gpt-4o-mini", config)
        assert first.endpoint is second.endpoint  # type: ignore[attr-defined]
        await first.complete(request())
        await second.complete(request())
    assert [r.json["model"] for r in server.requests] == ["gpt-4o", "gpt-4o-mini"]


async def test_consecutive_calls_reuse_one_connection(registry: ModelRegistry) -> None:
    async with FakeOpenAI([Reply(text="one", chunk=2), Reply(text="two", chunk=2)]) as server:
        model = registry.resolve("openai:gpt-4o", server.models_config())
        first = await model.complete(request())
        second = await model.complete(request())
    assert (first.content, second.content) == ("one", "two")
    assert server.connections == 1
