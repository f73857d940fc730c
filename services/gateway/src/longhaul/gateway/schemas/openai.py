"""``/v1``: the slice of OpenAI's chat-completions API a chat UI or script needs."""

from __future__ import annotations

from typing import Any, Literal

from longhaul.gateway.schemas.common import Name, Text
from longhaul.gateway.schemas.traces import ChatMessage
from pydantic import BaseModel, ConfigDict, Field, field_validator


class StreamOptions(BaseModel):
    model_config = ConfigDict(extra="ignore")

    include_usage: bool = Field(
        default=False,
        description="end the stream with a chunk of no choices that carries the usage",
    )


class FunctionDefinition(BaseModel):
    model_config = ConfigDict(extra="ignore")

    name: Name
    description: Text = ""
    parameters: dict[str, Any] | None = Field(
        default=None, description="the arguments' JSON schema (default: no arguments)"
    )


class ChatTool(BaseModel):
    """A function the client runs: the run hands each call back in ``tool_calls``."""

    model_config = ConfigDict(extra="ignore")

    type: Literal["function"]
    function: FunctionDefinition


class JsonSchemaFormat(BaseModel):
    model_config = ConfigDict(extra="ignore", populate_by_name=True)

    name: Name
    schema_: dict[str, Any] | None = Field(default=None, alias="schema")
    strict: bool | None = None


class ResponseFormat(BaseModel):
    model_config = ConfigDict(extra="ignore")

    type: Literal["text", "json_object", "json_schema"]
    json_schema: JsonSchemaFormat | None = None


class ChatCompletionRequest(BaseModel):
    """Fields OpenAI clients send that longhaul has no use for (``n``, ``user`` …) are
    ignored, as OpenAI-compatible servers do. ``developer`` messages (what current OpenAI
    clients send for instructions) are read as ``system``."""

    model_config = ConfigDict(extra="ignore")

    model: str = Field(
        min_length=1,
        max_length=256,
        description="longhaul/<preset> (GET /v1/models), or a longhaul model string "
        "(provider:model) run with the default preset",
    )
    messages: list[ChatMessage] = Field(min_length=1, max_length=2000)
    stream: bool = False
    stream_options: StreamOptions | None = None
    temperature: float | None = Field(default=None, ge=0, le=2, allow_inf_nan=False)
    tools: list[ChatTool] | None = Field(
        default=None,
        max_length=128,
        description="functions the client runs; with them the model is offered these only",
    )
    tool_choice: Literal["auto", "none", "required"] | dict[str, Any] | None = Field(
        default=None,
        description='auto | none | required | {"type": "function", "function": {"name"}}',
    )
    parallel_tool_calls: bool | None = None
    response_format: ResponseFormat | None = None

    @field_validator("messages", mode="before")
    @classmethod
    def _developer_is_system(cls, messages: Any) -> Any:
        if not isinstance(messages, list):
            return messages
        return [
            {**m, "role": "system"} if isinstance(m, dict) and m.get("role") == "developer" else m
            for m in messages
        ]


class ModelCard(BaseModel):
    id: str
    object: Literal["model"] = "model"
    created: int = 0
    owned_by: str = "longhaul"


class ModelList(BaseModel):
    object: Literal["list"] = "list"
    data: list[ModelCard]


class OpenAIErrorDetail(BaseModel):
    message: str
    type: str
    param: str | None = None
    code: str | None = None
    trace_id: str | None = Field(
        default=None, description="the run that failed (424, 422 and stream error events)"
    )


class OpenAIError(BaseModel):
    error: OpenAIErrorDetail


class RunInfo(BaseModel):
    """Where the run behind a completion stands (an extension field, ``longhaul``)."""

    trace_id: str
    status: str
    wait_reason: str | None = None
    viewer: str


class FunctionCall(BaseModel):
    name: str
    arguments: str


class ToolCall(BaseModel):
    id: str
    type: Literal["function"] = "function"
    function: FunctionCall


class CompletionMessage(BaseModel):
    role: Literal["assistant"] = "assistant"
    content: str | None
    tool_calls: list[ToolCall] | None = Field(
        default=None, description="calls of the client's tools the run waits on"
    )


class Choice(BaseModel):
    index: int = 0
    message: CompletionMessage
    finish_reason: Literal["stop", "tool_calls"] = "stop"


class Usage(BaseModel):
    prompt_tokens: int
    completion_tokens: int
    total_tokens: int


class ChatCompletion(BaseModel):
    id: str
    object: Literal["chat.completion"] = "chat.completion"
    created: int
    model: str
    choices: list[Choice]
    usage: Usage
    trace_id: str = Field(description="the durable trace this run is (also X-Longhaul-Trace-Id)")
    longhaul: RunInfo


def chunk(
    completion_id: str,
    created: int,
    model: str,
    trace_id: str,
    delta: dict[str, Any],
    finish_reason: str | None = None,
) -> dict[str, Any]:
    """One ``chat.completion.chunk`` of a streamed answer."""
    return {
        "id": completion_id,
        "object": "chat.completion.chunk",
        "created": created,
        "model": model,
        "trace_id": trace_id,
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}],
    }


def usage_chunk(
    completion_id: str, created: int, model: str, trace_id: str, usage: Usage
) -> dict[str, Any]:
    """The last chunk of a stream asked for with ``stream_options.include_usage``: no
    choices, the usage (as OpenAI ends such a stream)."""
    head = chunk(completion_id, created, model, trace_id, {})
    return {**head, "choices": [], "usage": usage.model_dump()}
