"""The offline scripted: provider and its schema-driven argument generator."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

import jsonschema
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from longhaul.llm import (
    ChatMessage,
    ModelRegistry,
    ModelRequest,
    ModelResponse,
    ScriptedModel,
    StreamEnd,
    TextDelta,
    ToolCallDelta,
    ToolSpec,
    parse_arguments,
)
from longhaul.llm.scripted import EXHAUSTED, auto_turn, demo_turn, sample_schema
from longhaul.llm.scripted.model import TurnScript, load_script
from pydantic import BaseModel, Field

from tests.unit.llm.conftest import drain


class Edit(BaseModel):
    path: str = Field(min_length=3, max_length=40)
    mode: Literal["append", "replace"]
    line: int | None = Field(default=None, ge=1)


class Batch(BaseModel):
    edits: list[Edit] = Field(min_length=2)
    dry_run: bool = False
    note: str = Field(pattern=r"^[A-Z]{2}-\d{3}$")


TOOLS = [
    ToolSpec(
        name="bash",
        parameters={
            "type": "object",
            "required": ["command", "timeout_s"],
            "additionalProperties": False,
            "properties": {
                "command": {"type": "string", "minLength": 1},
                "timeout_s": {"type": "number", "exclusiveMinimum": 0, "maximum": 600},
            },
        },
    ),
    ToolSpec(name="batch_edit", parameters=Batch.model_json_schema()),
    ToolSpec(name="noop"),
]


def validate(schema: dict[str, Any], value: Any) -> None:
    jsonschema.Draft202012Validator(schema).validate(value)


async def run_loop(
    model: ScriptedModel, tools: list[ToolSpec], **request: Any
) -> list[dict[str, Any]]:
    """A minimal agent loop: answer each tool call with a canned result until a final text."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": "do the thing"}]
    for _ in range(10):
        response = await model.complete(
            ModelRequest(model=model.name, messages=messages, tools=tools, **request)
        )
        messages.append(response.to_message())
        if not response.tool_calls:
            return messages
        for call in response.tool_calls:
            messages.append({"role": "tool", "tool_call_id": call.id, "content": f"{call.name} ok"})
    raise AssertionError("loop did not finish")


async def test_auto_calls_each_tool_once_with_valid_arguments_then_summarises(
    registry: ModelRegistry,
) -> None:
    model = registry.resolve("scripted:auto")
    assert isinstance(model, ScriptedModel)
    messages = await run_loop(model, TOOLS)
    calls = [m["tool_calls"][0] for m in messages if m.get("tool_calls")]
    assert [c["function"]["name"] for c in calls] == ["bash", "batch_edit", "noop"]
    for call, tool in zip(calls, TOOLS, strict=True):
        validate(tool.parameters, parse_arguments(call["function"]["arguments"]))
    final = messages[-1]["content"]
    assert final.startswith("All tools were called.")
    assert "- bash: bash ok" in final and "- noop: noop ok" in final


async def test_auto_is_deterministic_and_streams_in_chunks() -> None:
    model = ScriptedModel(lambda r: {"content": "a longer answer than one chunk"}, chunk_chars=5)
    request = ModelRequest(model="scripted:x", messages=[{"role": "user", "content": "q"}])
    events = await drain(model, request)
    assert len([e for e in events if isinstance(e, TextDelta)]) == 6
    end = events[-1]
    assert isinstance(end, StreamEnd) and end.response.usage.estimated
    assert end.response.usage.completion_tokens == 8

    auto = ScriptedModel(__import__("longhaul.llm.scripted", fromlist=["auto_turn"]).auto_turn)
    tool_request = ModelRequest(model="scripted:auto", messages=request.messages, tools=TOOLS)
    first, second = [await drain(auto, tool_request) for _ in range(2)]
    assert first == second
    fragments = [e for e in first if isinstance(e, ToolCallDelta)]
    assert fragments[0].name == "bash" and len(fragments) > 2


async def test_auto_answers_structured_requests_with_a_schema_instance(
    registry: ModelRegistry,
) -> None:
    schema = Batch.model_json_schema()
    model = registry.resolve("scripted:auto")
    response = await model.complete(
        ModelRequest(
            model="scripted:auto",
            messages=[{"role": "user", "content": "plan"}],
            response_schema=schema,
        )
    )
    validate(schema, json.loads(response.content))


async def test_auto_without_tools_echoes_the_request(registry: ModelRegistry) -> None:
    response = await registry.resolve("scripted:auto").complete(
        ModelRequest(model="scripted:auto", messages=[{"role": "user", "content": "ping"}])
    )
    assert response.content.endswith("ping") and response.finish_reason == "stop"


async def test_file_script_runs_then_reports_exhaustion(
    tmp_path: Path, registry: ModelRegistry
) -> None:
    script = tmp_path / "script.yaml"
    script.write_text(
        "- content: let me check\n"
        "  tool_calls:\n"
        "    - name: bash\n"
        "      arguments: {command: ls, timeout_s: 5}\n"
        "    - name: noop\n"
        "      arguments: '{not json'\n"
        "- content: all done\n"
    )
    model = registry.resolve(f"scripted:{script}")
    assert isinstance(model, ScriptedModel)
    messages = await run_loop(model, TOOLS)
    first = messages[1]
    assert first["content"] == "let me check"
    assert [c["function"]["arguments"] for c in first["tool_calls"]] == [
        '{"command": "ls", "timeout_s": 5}',
        "{not json",
    ]
    assert len({c["id"] for c in first["tool_calls"]}) == 2
    assert messages[-1]["content"] == "all done"
    extra = await model.complete(ModelRequest(model=model.name, messages=messages))
    assert extra.content == EXHAUSTED and extra.finish_reason == "stop"


def test_a_script_file_is_parsed_once_per_version(tmp_path: Path) -> None:
    """An executor resolves a trace's model every turn: the file is parsed once, and again
    only when it changes."""
    script = tmp_path / "script.yaml"
    script.write_text("- content: one\n")
    first = load_script(script)
    assert load_script(script) is first
    script.write_text("- content: two, longer\n")
    second = load_script(script)
    assert second is not first
    assert isinstance(second, TurnScript) and second.turns == [{"content": "two, longer"}]


def test_bad_script_files_are_rejected(tmp_path: Path, registry: ModelRegistry) -> None:
    not_list = tmp_path / "a.json"
    not_list.write_text('{"content": "x"}')
    bad_key = tmp_path / "b.json"
    bad_key.write_text('[{"text": "x"}]')
    with pytest.raises(ValueError, match="list of turns"):
        registry.resolve(f"scripted:{not_list}")
    with pytest.raises(ValueError, match="unknown turn keys"):
        registry.resolve(f"scripted:{bad_key}")


async def test_callables_sync_and_async_returning_turns_or_responses() -> None:
    async def slow(request: ModelRequest) -> ModelResponse:
        return ModelResponse(content=f"{len(request.messages)} messages", finish_reason="length")

    request = ModelRequest(model="t", messages=[{"role": "user", "content": "x"}])
    response = await ScriptedModel(slow, latency_s=0.01).complete(request)
    assert (response.content, response.finish_reason) == ("1 messages", "length")
    sync = ScriptedModel(
        lambda r: {
            "tool_calls": [{"name": "noop", "id": "call_fixed"}],
            "usage": {"prompt_tokens": 3, "completion_tokens": 1},
        }
    )
    response = await sync.complete(request)
    assert response.tool_calls[0].id == "call_fixed"
    assert response.tool_calls[0].arguments == "{}"
    assert response.usage.prompt_tokens == 3 and not response.usage.estimated
    listed = ScriptedModel([{"content": "one"}])
    assert (await listed.complete(request)).content == "one"


def test_schema_sampler_edge_cases() -> None:
    cases: list[dict[str, Any]] = [
        {"type": "integer", "minimum": 7, "maximum": 7},
        {"type": "integer", "exclusiveMinimum": 10, "multipleOf": 4},
        {"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 0.001},
        {"type": "integer", "multipleOf": 0.5, "minimum": 3},
        {"type": "number", "multipleOf": 0.1, "minimum": 0.25},
        {
            "type": "array",
            "items": {"type": "integer", "maximum": 0},
            "minItems": 4,
            "uniqueItems": True,
        },
        {"type": "array", "prefixItems": [{"const": "x"}, {"type": "null"}], "minItems": 2},
        {"type": "string", "maxLength": 2},
        {"type": "string", "pattern": r"^v\d+\.\d+\.\d+(-rc\d+)?$"},
        {"type": "string", "format": "date-time"},
        {"type": ["null", "boolean"]},
        {"type": "object", "minProperties": 2, "additionalProperties": {"type": "integer"}},
        {
            "allOf": [
                {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]},
                {"properties": {"b": {"enum": [3, 4]}}, "required": ["b"]},
            ]
        },
        {
            "oneOf": [
                {"type": "object", "properties": {"kind": {"const": "x"}}, "required": ["kind"]},
                {"type": "string"},
            ]
        },
        {
            "$defs": {
                "node": {
                    "type": "object",
                    "properties": {
                        "child": {"anyOf": [{"$ref": "#/$defs/node"}, {"type": "null"}]}
                    },
                    "required": ["child"],
                }
            },
            "$ref": "#/$defs/node",
        },
    ]
    for schema in cases:
        value = sample_schema(schema)
        assert sample_schema(schema) == value
        validate(schema, value)
    draft4 = {"type": "number", "minimum": 1, "exclusiveMinimum": True, "maximum": 1.5}
    jsonschema.Draft4Validator(draft4).validate(sample_schema(draft4))


# -- property: generated schemas -------------------------------------------------------------

names = st.text(alphabet="abcdefghij_", min_size=1, max_size=6)


@st.composite
def integer_schemas(draw: st.DrawFn) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "integer"}
    low = draw(st.none() | st.integers(-50, 50))
    step = draw(st.none() | st.integers(1, 7))
    if low is not None:
        schema["exclusiveMinimum" if draw(st.booleans()) else "minimum"] = low
    if draw(st.booleans()):
        base = low if low is not None else draw(st.integers(-50, 50))
        width = draw(st.integers(2 * (step or 1) + 1, 100))
        schema["exclusiveMaximum" if draw(st.booleans()) else "maximum"] = base + width
    if step:
        schema["multipleOf"] = step
    return schema


@st.composite
def number_schemas(draw: st.DrawFn) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "number"}
    low = draw(st.none() | st.floats(-1e3, 1e3, allow_nan=False))
    step = draw(st.none() | st.sampled_from([0.5, 0.25, 2, 3]))
    if low is not None:
        schema["exclusiveMinimum" if draw(st.booleans()) else "minimum"] = low
    if draw(st.booleans()):
        base = low if low is not None else 0.0
        width = draw(st.floats(0.001, 100)) + 2 * (step or 0)
        schema["exclusiveMaximum" if draw(st.booleans()) else "maximum"] = base + width
    if step:
        schema["multipleOf"] = step
    return schema


@st.composite
def string_schemas(draw: st.DrawFn) -> dict[str, Any]:
    choice = draw(st.sampled_from(["plain", "lengths", "pattern", "format", "enum"]))
    if choice == "lengths":
        low = draw(st.integers(0, 8))
        return {"type": "string", "minLength": low, "maxLength": low + draw(st.integers(0, 5))}
    if choice == "pattern":
        return {
            "type": "string",
            "pattern": draw(
                st.sampled_from(
                    [
                        r"^[a-z]+$",
                        r"^\d{3}-\d{4}$",
                        r"^(foo|bar)_[A-Z]\w*$",
                        r"[0-9a-f]{8}",
                        r"^\S+@\S+\.com$",
                        r"^[^\s/]{2,5}(/[a-z]+)*$",
                    ]
                )
            ),
        }
    if choice == "format":
        return {"type": "string", "format": draw(st.sampled_from(["date", "email", "uuid"]))}
    if choice == "enum":
        return {
            "enum": draw(
                st.lists(st.text(max_size=4) | st.integers(), min_size=1, max_size=4, unique=True)
            )
        }
    return {"type": "string"}


leaves: st.SearchStrategy[dict[str, Any]] = (
    integer_schemas()
    | number_schemas()
    | string_schemas()
    | st.just({"type": "boolean"})
    | st.just({"type": "null"})
    | st.just({})
    | st.builds(lambda v: {"const": v}, st.integers() | st.text(max_size=3))
)


def containers(children: st.SearchStrategy[dict[str, Any]]) -> st.SearchStrategy[dict[str, Any]]:
    @st.composite
    def objects(draw: st.DrawFn) -> dict[str, Any]:
        properties = draw(st.dictionaries(names, children, max_size=4))
        required = [key for key in properties if draw(st.booleans())]
        schema: dict[str, Any] = {"type": "object", "properties": properties, "required": required}
        if draw(st.booleans()):
            schema["additionalProperties"] = False
        return schema

    @st.composite
    def arrays(draw: st.DrawFn) -> dict[str, Any]:
        low = draw(st.integers(0, 3))
        schema: dict[str, Any] = {"type": "array", "items": draw(children), "minItems": low}
        if draw(st.booleans()):
            schema["maxItems"] = low + draw(st.integers(0, 3))
        return schema

    nullable = children.map(lambda s: {"anyOf": [s, {"type": "null"}]})
    return objects() | arrays() | nullable


schemas = st.recursive(leaves, containers, max_leaves=12)


@settings(max_examples=300, deadline=None)
@given(schemas)
def test_samples_validate_against_generated_schemas(schema: dict[str, Any]) -> None:
    value = sample_schema(schema)
    validate(schema, value)
    assert sample_schema(schema) == value


def test_auto_asks_a_person_only_when_nothing_else_is_offered() -> None:
    tools = [
        ToolSpec(name="ask_human", parameters={"type": "object", "properties": {}}),
        ToolSpec(name="glob", parameters={"type": "object", "properties": {}}),
    ]
    request = ModelRequest(
        model="scripted:auto", messages=[{"role": "user", "content": "q"}], tools=tools
    )
    first = auto_turn(request)
    assert [c["name"] for c in first["tool_calls"]] == ["glob"]
    done: list[ChatMessage] = [
        {"role": "user", "content": "q"},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "glob", "arguments": "{}"}}
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "a.txt"},
    ]
    answer = auto_turn(ModelRequest(model="scripted:auto", messages=done, tools=tools))
    assert "tool_calls" not in answer and "a.txt" in answer["content"]
    only_human = auto_turn(
        ModelRequest(model="scripted:auto", messages=request.messages, tools=tools[:1])
    )
    assert [c["name"] for c in only_human["tool_calls"]] == ["ask_human"]


def _tool_reply(call: dict[str, Any], output: str) -> list[ChatMessage]:
    call_id = f"c_{call['name']}"
    assistant: ChatMessage = {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {
                "id": call_id,
                "type": "function",
                "function": {"name": call["name"], "arguments": json.dumps(call["arguments"])},
            }
        ],
    }
    return [assistant, {"role": "tool", "tool_call_id": call_id, "content": output}]


def test_demo_without_sub_agents_writes_and_answers_without_delegating() -> None:
    tools = [ToolSpec(name=name) for name in ("goal", "glob", "read", "write")]
    messages: list[ChatMessage] = [{"role": "user", "content": "tidy up"}]
    names: list[str] = []
    for _ in range(10):
        turn = demo_turn(ModelRequest(model="scripted:demo", messages=messages, tools=tools))
        calls = turn.get("tool_calls") or []
        if not calls:
            break
        names += [call["name"] for call in calls]
        for call in calls:
            output = "a.txt" if call["name"] == "glob" else "ok"
            messages += _tool_reply(call, output)
    assert "agent" not in names and names.count("write") == 1
    assert turn["content"].startswith("Done.") and "sub-agent" not in turn["content"]


def test_demo_falls_back_to_auto_for_structured_output_and_missing_tools() -> None:
    schema = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}
    structured = ModelRequest(
        model="scripted:demo",
        messages=[{"role": "user", "content": "judge"}],
        tools=[],
        response_schema=schema,
    )
    assert demo_turn(structured) == auto_turn(structured)
    bare = ModelRequest(model="scripted:demo", messages=[{"role": "user", "content": "hi"}])
    assert demo_turn(bare) == auto_turn(bare)


def test_demo_in_an_empty_workdir_says_there_was_nothing_to_read() -> None:
    tools = [ToolSpec(name=name) for name in ("goal", "glob", "read", "write")]
    messages: list[ChatMessage] = [{"role": "user", "content": "look around"}]
    names: list[str] = []
    for _ in range(10):
        turn = demo_turn(ModelRequest(model="scripted:demo", messages=messages, tools=tools))
        calls = turn.get("tool_calls") or []
        if not calls:
            break
        names += [call["name"] for call in calls]
        for call in calls:
            messages += _tool_reply(call, "no matches" if call["name"] == "glob" else "ok")
    assert "read" not in names and "write" in names
    assert turn["content"].startswith("Done. The working directory had no files yet")
