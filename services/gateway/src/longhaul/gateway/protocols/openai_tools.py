"""``/v1`` function calling and structured output: what a chat-completions request asks of its
run beside its messages, and the client's tool calls a run hands back.

A request's ``tools`` are the client's: the trace offers the model those only (as OpenAI's API
does) as client tools (``TraceConfig.client_tools``), so a call of one ends the run's request
waiting for the client (``client_tools``) and the completion answers it as ``tool_calls``;
the next request's ``tool`` messages are the results. ``tool_choice`` and
``parallel_tool_calls`` become the trace's ``model_params`` (each provider's form), and
``response_format`` its ``output_schema``. Each request's settings apply from its run on: a
continuation that changes them carries the new config on its event.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Literal

import msgspec
from longhaul.domain import events as ev
from longhaul.domain.state import TraceState
from longhaul.gateway.errors import ApiError
from longhaul.gateway.protocols.run_outcome import text_of
from longhaul.gateway.schemas.openai import (
    ChatCompletionRequest,
    FunctionCall,
    ResponseFormat,
    ToolCall,
)
from longhaul.gateway.schemas.settings import (
    ClientToolBody,
    ModelParamsBody,
    NamedToolChoice,
    OutputSchemaBody,
)
from longhaul.gateway.schemas.traces import ChatMessage
from longhaul.gateway.usecases.start import client_tools, model_params, output_schema
from longhaul.llm.structured import extract_json

Choice = Literal["auto", "none", "required"] | NamedToolChoice


def _refused(message: str, param: str) -> ApiError:
    return ApiError(400, "invalid_request", f"{message} ({param})")


def _tool_choice(
    raw: Literal["auto", "none", "required"] | dict[str, Any] | None, names: list[str]
) -> Choice | None:
    """OpenAI's ``tool_choice`` as ours; a form longhaul cannot honour is refused, never
    ignored."""
    if raw is None:
        return None
    if not names:
        raise _refused("tool_choice is only allowed when tools are specified", "tool_choice")
    if isinstance(raw, str):
        return raw
    function = raw.get("function")
    name = function.get("name") if isinstance(function, dict) else None
    if raw.get("type") != "function" or not isinstance(name, str):
        raise _refused(
            'tool_choice must be auto, none, required or {"type": "function", "function": '
            '{"name": …}} (allowed_tools and custom tools are not supported)',
            "tool_choice",
        )
    if name not in names:
        raise _refused(f"tool_choice names {name!r}, which is not among the tools", "tool_choice")
    return NamedToolChoice(name=name)


def _output(format: ResponseFormat | None) -> OutputSchemaBody | None:
    if format is None or format.type == "text":
        return None
    if format.type == "json_object":
        return OutputSchemaBody(schema={"type": "object"})
    spec = format.json_schema
    if spec is None:
        raise _refused("a json_schema response_format needs json_schema", "response_format")
    return OutputSchemaBody(
        schema=spec.schema_ if spec.schema_ is not None else {"type": "object"},
        name=spec.name,
        strict=bool(spec.strict),
    )


@dataclass(frozen=True)
class Asked:
    """A request's function-calling and output settings."""

    tools: list[ClientToolBody] | None
    tool_choice: Choice | None
    parallel_tool_calls: bool | None
    output: OutputSchemaBody | None

    def params(self) -> ModelParamsBody | None:
        if self.tool_choice is None and self.parallel_tool_calls is None:
            return None
        return ModelParamsBody(
            tool_choice=self.tool_choice, parallel_tool_calls=self.parallel_tool_calls
        )

    def creation(self) -> dict[str, Any]:
        """Fields of the ``CreateTraceRequest`` that starts the conversation's trace."""
        if self.tools is None:
            return {"model_params": self.params(), "output_schema": self.output}
        return {
            "tools": [],  # the model sees the client's tools only
            "client_tools": self.tools,
            "model_params": self.params(),
            "output_schema": self.output,
        }

    def config(self, current: ev.TraceConfig) -> ev.TraceConfig | None:
        """``current`` with this request's settings, or None when they are the same."""
        params = current.model_params or ev.ModelParams()
        asked = self.params()
        changes = (
            ev.ModelParams() if asked is None else model_params(asked)
        )  # what this request says of the two fields it owns
        params = msgspec.structs.replace(
            params,
            tool_choice=changes.tool_choice,
            parallel_tool_calls=changes.parallel_tool_calls,
        )
        updated = msgspec.structs.replace(
            current,
            tools=[] if self.tools is not None else current.tools,
            client_tools=client_tools(self.tools),
            model_params=None if params == ev.ModelParams() else params,
            output_schema=output_schema(self.output),
        )
        return None if updated == current else updated


def asked(body: ChatCompletionRequest) -> Asked:
    """What ``body`` asks beside its messages (400 for what cannot be honoured)."""
    tools = [
        ClientToolBody(
            name=tool.function.name,
            description=tool.function.description,
            parameters=tool.function.parameters or {"type": "object", "properties": {}},
        )
        for tool in body.tools or []
    ]
    names = [tool.name for tool in tools]
    if body.parallel_tool_calls is not None and not tools:
        raise _refused(
            "parallel_tool_calls is only allowed when tools are specified", "parallel_tool_calls"
        )
    return Asked(
        tools=tools or None,
        tool_choice=_tool_choice(body.tool_choice, names),
        parallel_tool_calls=body.parallel_tool_calls,
        output=_output(body.response_format),
    )


def handed_over(state: TraceState) -> tuple[str, list[ToolCall]]:
    """(the text beside them, the calls) of the client's calls the run waits on."""
    pending = set(state.client_calls.pending)
    for message in reversed(state.main_path()):
        if message.role == "assistant" and message.tool_calls:
            calls = [
                ToolCall(
                    id=call.id,
                    function=FunctionCall(name=call.name, arguments=call.arguments),
                )
                for call in message.tool_calls
                if call.id in pending
            ]
            return text_of(message.content), calls
    return "", []


def structured(state: TraceState, answer: str) -> str:
    """A structured answer as plain JSON (models like to fence it; clients parse it)."""
    if state.config.output_schema is None:
        return answer
    try:
        return json.dumps(extract_json(answer), ensure_ascii=False)
    except ValueError:
        return answer


def turn_key(message: ChatMessage) -> list[Any]:
    """What of a message names the conversation: role and text, and the tool calls' ids
    (arguments are left out: clients re-serialise them)."""
    text = text_of(message.content)
    if message.role == "assistant" and message.tool_calls:
        return [message.role, text, [call.id for call in message.tool_calls]]
    if message.role == "tool":
        return [message.role, text, message.tool_call_id]
    return [message.role, text]


def trailing_results(messages: list[ChatMessage]) -> int:
    """How many ``tool`` messages end the conversation."""
    count = 0
    for message in reversed(messages):
        if message.role != "tool":
            break
        count += 1
    return count
