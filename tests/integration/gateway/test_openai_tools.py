"""``/v1`` function calling and structured output, driven by OpenAI's own Python client
against a real gateway and executor: the client's tools handed back as ``tool_calls`` (whole
and streamed) and its ``tool`` messages continuing the same trace; ``tool_choice`` and
``parallel_tool_calls`` honoured or refused; ``response_format`` sent to each provider in its
own form (fake OpenAI, Anthropic and Gemini servers on loopback record what they received)
and the answer checked against the schema; ``output_schema`` on ``POST /api/traces``."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import openai
import pytest
from longhaul.client import AsyncClient
from longhaul.core.config import NatsConfig
from longhaul.domain.config import PipelineConfig
from openai.types.chat import ChatCompletionMessageParam, ChatCompletionToolParam
from pydantic import BaseModel

from tests.integration.executor.scripts import write_script
from tests.integration.gateway.harness import KEY_A, RunningGateway, gateway_config, serve_gateway
from tests.integration.gateway.test_openai_compat import client_for, user
from tests.support.llm_fakes import Call, FakeAnthropic, FakeGemini, FakeOpenAI, FakeServer, Reply
from tests.support.stack import InProcessExecutor, test_config

WEATHER: ChatCompletionToolParam = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The weather in a city.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
    },
}


class Weather(BaseModel):
    city: str
    sunny: bool


def weather_call(city: str) -> dict[str, Any]:
    return {"name": "get_weather", "arguments": {"city": city}}


async def messages_of(gateway: RunningGateway, trace_id: str) -> list[dict[str, Any]]:
    async with gateway.client(KEY_A) as http:
        return list((await http.get(f"/api/traces/{trace_id}/messages")).json()["messages"])


async def test_a_client_tool_call_is_handed_back_and_its_result_continues_the_trace(
    keyed_stack: RunningGateway, tmp_path: Path
) -> None:
    model = write_script(
        tmp_path / "tools.yaml",
        [{"content": "let me look", "tool_calls": [weather_call("Paris")]}, {"content": "sunny"}],
    )
    client = client_for(keyed_stack, KEY_A)
    asked: list[ChatCompletionMessageParam] = [user("weather in Paris?")]
    raw = await client.chat.completions.with_raw_response.create(
        model=model, messages=asked, tools=[WEATHER], tool_choice="auto"
    )
    completion = raw.parse()
    trace_id = raw.headers["x-longhaul-trace-id"]
    choice = completion.choices[0]
    assert choice.finish_reason == "tool_calls"
    assert choice.message.content == "let me look"
    [call] = choice.message.tool_calls or []
    assert call.type == "function" and call.function.name == "get_weather"
    assert json.loads(call.function.arguments) == {"city": "Paris"}

    answered = await client.chat.completions.with_raw_response.create(
        model=model,
        messages=[
            *asked,
            choice.message.model_dump(exclude_none=True),  # type: ignore[list-item]
            {"role": "tool", "tool_call_id": call.id, "content": "22 C and sunny"},
        ],
        tools=[WEATHER],
    )
    assert answered.headers["x-longhaul-trace-id"] == trace_id
    final = answered.parse().choices[0]
    assert final.finish_reason == "stop" and final.message.content == "sunny"
    path = await messages_of(keyed_stack, trace_id)
    results = [m for m in path if m["role"] == "tool"]
    assert [(r["tool_call_id"], r["content"]) for r in results] == [(call.id, "22 C and sunny")]


async def test_streamed_tool_calls_arrive_as_deltas(
    keyed_stack: RunningGateway, tmp_path: Path
) -> None:
    model = write_script(
        tmp_path / "stream.yaml",
        [{"tool_calls": [weather_call("Oslo"), weather_call("Rome")]}, {"content": "both cold"}],
    )
    client = client_for(keyed_stack, KEY_A)
    asked: list[ChatCompletionMessageParam] = [user("weather in Oslo and Rome?")]
    stream = await client.chat.completions.create(
        model=model, messages=asked, tools=[WEATHER], stream=True
    )
    calls: dict[int, dict[str, str]] = {}
    finish = None
    async for chunk in stream:
        choice = chunk.choices[0]
        finish = choice.finish_reason or finish
        for delta in choice.delta.tool_calls or []:
            call = calls.setdefault(delta.index, {"id": "", "name": "", "arguments": ""})
            call["id"] += delta.id or ""
            if delta.function is not None:
                call["name"] += delta.function.name or ""
                call["arguments"] += delta.function.arguments or ""
    assert finish == "tool_calls"
    assert [c["name"] for c in calls.values()] == ["get_weather", "get_weather"]
    assert [json.loads(c["arguments"]) for c in calls.values()] == [
        {"city": "Oslo"},
        {"city": "Rome"},
    ]
    reply: Any = {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": c["id"], "type": "function", "function": {"name": c["name"], "arguments": "{}"}}
            for c in calls.values()
        ],
    }
    results: list[Any] = [
        {"role": "tool", "tool_call_id": c["id"], "content": "cold"} for c in calls.values()
    ]
    final = await client.chat.completions.create(
        model=model, messages=[*asked, reply, *results], tools=[WEATHER]
    )
    assert final.choices[0].message.content == "both cold"


async def test_tool_choice_and_parallel_tool_calls_are_honoured_or_refused(
    keyed_stack: RunningGateway, tmp_path: Path
) -> None:
    # parallel_tool_calls false: of two calls only the first is handed back (and run)
    model = write_script(
        tmp_path / "two.yaml", [{"tool_calls": [weather_call("Oslo"), weather_call("Rome")]}]
    )
    client = client_for(keyed_stack, KEY_A)
    one = await client.chat.completions.create(
        model=model,
        messages=[user("both?")],
        tools=[WEATHER],
        tool_choice={"type": "function", "function": {"name": "get_weather"}},
        parallel_tool_calls=False,
    )
    calls = one.choices[0].message.tool_calls or []
    assert [json.loads(c.function.arguments)["city"] for c in calls if c.type == "function"] == [
        "Oslo"
    ]

    refusals: list[dict[str, Any]] = [
        {"tool_choice": {"type": "function", "function": {"name": "not_a_tool"}}},
        {"tool_choice": {"type": "allowed_tools", "allowed_tools": {"mode": "auto", "tools": []}}},
        {"tool_choice": "required", "tools": None},
        {"parallel_tool_calls": False, "tools": None},
    ]
    for extra in refusals:
        arguments: dict[str, Any] = {"tools": [WEATHER], **extra}
        if arguments["tools"] is None:
            del arguments["tools"]
        with pytest.raises(openai.BadRequestError) as refused:
            await client.chat.completions.create(model=model, messages=[user("x")], **arguments)
        assert refused.value.type == "invalid_request_error", extra
        assert ("tool_choice" in refused.value.message) or (
            "parallel_tool_calls" in refused.value.message
        ), refused.value.message


async def test_a_structured_answer_is_checked_and_repaired(
    keyed_stack: RunningGateway, tmp_path: Path
) -> None:
    model = write_script(
        tmp_path / "json.yaml",
        [{"content": "It is sunny in Paris."}, {"content": '{"city": "Paris", "sunny": true}'}],
    )
    client = client_for(keyed_stack, KEY_A)
    raw = await client.chat.completions.with_raw_response.parse(
        model=model, messages=[user("weather?")], response_format=Weather
    )
    parsed = raw.parse().choices[0].message.parsed
    assert parsed == Weather(city="Paris", sunny=True)
    path = await messages_of(keyed_stack, raw.headers["x-longhaul-trace-id"])
    repairs = [m for m in path if m["role"] == "user" and "JSON schema" in str(m["content"])]
    assert len(repairs) == 1 and "not JSON" in repairs[0]["content"]

    never = write_script(tmp_path / "never.yaml", [{"content": "no"}] * 4)
    with pytest.raises(openai.UnprocessableEntityError) as failed:
        await client.chat.completions.create(
            model=never, messages=[user("weather?")], response_format={"type": "json_object"}
        )
    assert failed.value.code == "invalid_output"


class Count(BaseModel):
    n: int


async def test_output_schema_on_post_traces_and_the_parsed_answer(
    keyed_stack: RunningGateway, tmp_path: Path
) -> None:
    model = write_script(
        tmp_path / "out.yaml",
        [{"content": '```json\n{"n": "x"}\n```'}, {"content": '```json\n{"n": 3}\n```'}],
    )
    async with keyed_stack.client(KEY_A) as http:
        for field, value in [
            ("output_schema", {"schema": {"type": "object", "pattern": "(?<=a)b"}}),
            ("client_tools", [{"name": "t", "parameters": {"type": "string"}}]),
            ("client_tools", [{"name": "t"}, {"name": "t"}]),
        ]:
            bad = await http.post(
                "/api/traces", json={"messages": [user("count")], "model": model, field: value}
            )
            assert bad.status_code == 422, (field, bad.text)
            assert bad.json()["error"]["code"] in ("invalid_schema", "invalid_tools")
    async with AsyncClient(keyed_stack.url, KEY_A) as client:
        accepted = await client.create_trace("count", model=model, output_schema=Count)
        trace = await client.wait(accepted.trace_id)
        assert trace.status == "completed", trace
        assert trace.output(Count) == Count(n=3)
        assert trace.output() == {"n": 3}
        path = await client.messages(accepted.trace_id)
    repairs = [m for m in path.messages if m.role == "user" and "JSON schema" in str(m.content)]
    assert len(repairs) == 1 and "'x' is not of type 'integer'" in str(repairs[0].content)


async def test_client_tools_on_post_traces_wait_beside_the_trace_s_own(
    keyed_stack: RunningGateway, tmp_path: Path
) -> None:
    """A turn calling a server tool and a client tool: the server's runs, only the client's
    waits (``pending_client_calls``), and the posted result answers it."""
    (tmp_path / "work").mkdir(exist_ok=True)
    model = write_script(
        tmp_path / "mixed.yaml",
        [
            {
                "tool_calls": [
                    {"name": "glob", "arguments": {"pattern": "*"}},
                    {"name": "lookup", "arguments": {"key": "k"}},
                ]
            },
            {"content": "found it"},
        ],
    )
    lookup = {
        "name": "lookup",
        "description": "Look a key up on the client.",
        "parameters": {"type": "object", "properties": {"key": {"type": "string"}}},
    }
    async with AsyncClient(keyed_stack.url, KEY_A) as client:
        accepted = await client.create_trace(
            "look k up", model=model, tools=["glob"], client_tools=[lookup]
        )
        waiting = await client.wait(accepted.trace_id)
        assert waiting.wait_reason == "client_tools", waiting
        [pending] = waiting.pending_client_calls
        assert pending.name == "lookup" and json.loads(pending.arguments) == {"key": "k"}
        await client.tool_results(
            accepted.trace_id, [{"tool_call_id": pending.tool_call_id, "content": "v"}]
        )
        done = await client.wait(accepted.trace_id)
        assert done.status == "completed" and done.summary == "found it"
        path = (await client.messages(accepted.trace_id)).messages
    results = {m.tool_call_id: m for m in path if m.role == "tool"}
    assert results[pending.tool_call_id].content == "v"
    assert len(results) == 2  # glob ran on the server


# ---------------------------------------------------------------- provider forms


Provider = Callable[..., FakeServer]


@pytest.fixture(params=["openai", "anthropic", "gemini"])
async def provider_stack(
    request: pytest.FixtureRequest,
    nats_config: NatsConfig,
    nats_url: str,
    namespace: str,
    tmp_path: Path,
) -> AsyncIterator[tuple[RunningGateway, FakeServer]]:
    """A gateway whose executor's model is a fake provider of each wire format."""
    fakes: dict[str, Provider] = {
        "openai": FakeOpenAI,
        "anthropic": FakeAnthropic,
        "gemini": FakeGemini,
    }
    config = gateway_config(nats_config, api_keys=KEY_A)
    async with (
        fakes[request.param]() as provider,
        serve_gateway(config) as gateway,
        InProcessExecutor(
            nats_url,
            namespace,
            f"exec-{request.param}",
            config=test_config(
                nats_url,
                namespace,
                models=provider.models_config(),
                pipeline=PipelineConfig(titles=False),  # the fake sees the runs' calls only
            ),
            settings={"working_root": tmp_path},
        ),
    ):
        yield gateway, provider


def _tools_sent(provider: FakeServer, body: dict[str, Any]) -> tuple[list[str], Any]:
    """(offered tool names, tool choice) as the provider's wire carries them."""
    if provider.provider == "openai":
        return [t["function"]["name"] for t in body["tools"]], (
            body["tool_choice"],
            body["parallel_tool_calls"],
        )
    if provider.provider == "anthropic":
        return [t["name"] for t in body["tools"]], body["tool_choice"]
    declared = body["tools"][0]["functionDeclarations"]
    return [t["name"] for t in declared], body["toolConfig"]["functionCallingConfig"]


async def test_client_tools_and_tool_choice_reach_each_provider_in_its_form(
    provider_stack: tuple[RunningGateway, FakeServer],
) -> None:
    gateway, provider = provider_stack
    provider.script = [Reply(tool_calls=[Call("get_weather", {"city": "Paris"})])]
    client = client_for(gateway, KEY_A)
    completion = await client.chat.completions.create(
        model="longhaul/default",
        messages=[user("weather?")],
        tools=[WEATHER],
        tool_choice={"type": "function", "function": {"name": "get_weather"}},
        parallel_tool_calls=False,
    )
    assert completion.choices[0].finish_reason == "tool_calls"
    [sent] = [r.json for r in provider.requests]
    names, choice = _tools_sent(provider, sent)
    assert names == ["get_weather"]  # the client's tools only, none of longhaul's
    expected = {
        "openai": ({"type": "function", "function": {"name": "get_weather"}}, False),
        "anthropic": {"type": "tool", "name": "get_weather", "disable_parallel_tool_use": True},
        "gemini": {"mode": "ANY", "allowedFunctionNames": ["get_weather"]},
    }
    assert choice == expected[provider.provider]


def _schema_sent(provider: FakeServer, body: dict[str, Any]) -> tuple[Any, Any]:
    if provider.provider == "openai":
        form = body["response_format"]
        return form["json_schema"]["schema"], (form["type"], form["json_schema"]["strict"])
    format = body["output_config"]["format"]
    return format["schema"], format["type"]


async def test_response_format_reaches_each_provider_in_its_form(
    provider_stack: tuple[RunningGateway, FakeServer],
) -> None:
    gateway, provider = provider_stack
    provider.script = [Reply(text='{"city": "Paris", "sunny": false}')]
    client = client_for(gateway, KEY_A)
    completion = await client.chat.completions.parse(
        model="longhaul/default", messages=[user("weather?")], response_format=Weather
    )
    assert completion.choices[0].message.parsed == Weather(city="Paris", sunny=False)
    [sent] = [r.json for r in provider.requests]
    if provider.provider == "gemini":
        # beside longhaul's tools Gemini takes the schema as an instruction (it refuses JSON
        # mode with function calling); a trace without tools gets it natively
        assert "responseJsonSchema" not in sent.get("generationConfig", {})
        assert '\\"sunny\\"' in json.dumps(sent["contents"])
        provider.script = [Reply(text='{"n": 1}')]
        async with AsyncClient(gateway.url, KEY_A) as longhaul:
            accepted = await longhaul.create_trace(
                "n?", tools=[], output_schema=Count.model_json_schema()
            )
            assert (await longhaul.wait(accepted.trace_id)).output(Count) == Count(n=1)
        config = provider.requests[-1].json["generationConfig"]
        assert config["responseMimeType"] == "application/json"
        assert config["responseJsonSchema"] == Count.model_json_schema()
        return
    schema, form = _schema_sent(provider, sent)
    assert set(schema["properties"]) == {"city", "sunny"}
    expected = {"openai": ("json_schema", True), "anthropic": "json_schema"}
    assert form == expected[provider.provider]
    if provider.provider == "openai":
        provider.script = [Reply(text='{"any": 1}')]
        await client.chat.completions.create(
            model="longhaul/default",
            messages=[user("json please")],
            response_format={"type": "json_object"},
        )
        assert provider.requests[-1].json["response_format"] == {"type": "json_object"}


@pytest.mark.parametrize("provider_stack", ["openai"], indirect=True)
async def test_each_request_s_tool_choice_applies_from_its_run_on(
    provider_stack: tuple[RunningGateway, FakeServer],
) -> None:
    """As the Agents SDK does: ``required`` for the first call, ``auto`` with the results
    (the run goes on with the new choice); a turn that skips the results, or results sent
    twice, are refused."""
    gateway, provider = provider_stack
    provider.script = [Reply(tool_calls=[Call("get_weather", {"city": "Paris"})]), Reply("sunny")]
    client = client_for(gateway, KEY_A)
    asked: list[ChatCompletionMessageParam] = [user("weather?")]
    first = await client.chat.completions.create(
        model="longhaul/default", messages=asked, tools=[WEATHER], tool_choice="required"
    )
    message: Any = first.choices[0].message.model_dump(exclude_none=True)
    [call] = first.choices[0].message.tool_calls or []
    with pytest.raises(openai.BadRequestError) as skipped:
        await client.chat.completions.create(
            model="longhaul/default",
            messages=[*asked, message, user("never mind")],
            tools=[WEATHER],
        )
    assert "tool messages" in skipped.value.message
    answered: list[Any] = [
        *asked,
        message,
        {"role": "tool", "tool_call_id": call.id, "content": "22"},
    ]
    final = await client.chat.completions.create(
        model="longhaul/default", messages=answered, tools=[WEATHER], tool_choice="auto"
    )
    assert final.choices[0].message.content == "sunny"
    sent = [r.json["tool_choice"] for r in provider.requests]
    assert sent == ["required", "auto"]
    with pytest.raises(openai.ConflictError):
        await client.chat.completions.create(
            model="longhaul/default", messages=answered, tools=[WEATHER], tool_choice="auto"
        )
