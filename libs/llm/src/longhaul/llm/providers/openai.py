"""OpenAI Chat Completions, and every server that speaks it (vLLM, Ollama, llama.cpp).

Tool-call fragments arrive keyed by ``index``; some servers reuse index 0 for every call and
only change the ``id``, so a new id on a known index starts a new call. A stream without a
usage chunk (servers ignoring ``stream_options``) gets an estimated usage.
"""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator, AsyncIterator
from typing import Any

from longhaul.llm.arguments import InvalidToolArguments, arguments_object, parse_arguments
from longhaul.llm.assembly import ResponseAssembler
from longhaul.llm.http_model import HttpCall, decode_json
from longhaul.llm.ids import prepare_history
from longhaul.llm.prompt import context_note, split_system, system_prompt
from longhaul.llm.sse import SSEEvent
from longhaul.llm.tool_prefill import ToolPrefill
from longhaul.llm.types import (
    JSON_OBJECT,
    ChatMessage,
    ModelError,
    ModelRequest,
    StreamEvent,
    Usage,
)

_WIRE_KEYS = ("role", "content", "name", "tool_calls", "tool_call_id")
_REASONING_PREFIXES = ("o1", "o3", "o4", "gpt-5")


def _wire_arguments(arguments: Any) -> str:
    """Valid arguments go back verbatim; text that is not a JSON object (a call cut off by
    ``max_tokens``) goes back wrapped as one: llama.cpp parses the arguments of every call in
    the history and answers 500 to the whole request when one does not parse."""
    if not isinstance(arguments, str):
        return json.dumps(arguments)
    try:
        parse_arguments(arguments)
    except InvalidToolArguments:
        return json.dumps(arguments_object(arguments))
    return arguments


def _wire_tool_call(call: dict[str, Any]) -> dict[str, Any]:
    function = call.get("function", {})
    return {
        "id": call.get("id", ""),
        "type": "function",
        "function": {
            "name": function.get("name", ""),
            "arguments": _wire_arguments(function.get("arguments", "{}")),
        },
    }


def _wire_message(message: ChatMessage) -> dict[str, Any]:
    wire = {key: message[key] for key in _WIRE_KEYS if message.get(key) is not None}
    content = message.get("content")
    if content is None or (message.get("role") == "tool" and not isinstance(content, str | list)):
        wire["content"] = "" if content is None else json.dumps(content)
    if "tool_calls" in wire:
        wire["tool_calls"] = [_wire_tool_call(call) for call in wire["tool_calls"]]
    return wire


def _usage(raw: dict[str, Any]) -> Usage:
    details = raw.get("prompt_tokens_details") or {}
    return Usage(
        prompt_tokens=raw.get("prompt_tokens") or 0,
        completion_tokens=raw.get("completion_tokens") or 0,
        cache_read_tokens=details.get("cached_tokens") or 0,
    )


class _CallSlots:
    """Maps the server's tool-call ``index`` to ours, opening a new call on a new id."""

    def __init__(self) -> None:
        self._slots: dict[int, tuple[str | None, int]] = {}
        self._opened = 0

    def index_for(self, server_index: int, call_id: str | None) -> int:
        slot = self._slots.get(server_index)
        if slot is None or (call_id and slot[0] and call_id != slot[0]):
            slot = (call_id, self._opened)
            self._opened += 1
        elif call_id and not slot[0]:
            slot = (call_id, slot[1])
        self._slots[server_index] = slot
        return slot[1]


def _stream_error(error: Any) -> ModelError:
    details = error if isinstance(error, dict) else {"message": str(error)}
    return ModelError(
        f"openai: stream error: {details.get('message', details)}",
        retryable=details.get("type") != "invalid_request_error",
    )


def _sampling(body: dict[str, Any], request: ModelRequest) -> None:
    for key in ("top_p", "seed", "stop"):
        value = getattr(request, key)
        if value is not None:
            body[key] = value


def _response_format(request: ModelRequest) -> dict[str, Any]:
    """JSON mode for any object, else the schema (``strict`` when asked)."""
    if request.response_schema == JSON_OBJECT and not request.schema_strict:
        return {"type": "json_object"}
    schema: dict[str, Any] = {"name": request.schema_name, "schema": request.response_schema}
    if request.schema_strict:
        schema["strict"] = True
    return {"type": "json_schema", "json_schema": schema}


class OpenAICodec:
    """``named_tool_choice=False`` is for servers that only understand the string forms of
    ``tool_choice`` (llama.cpp ignores an object with a warning): a named choice is sent as
    ``required`` with only that tool offered, which forces the same call. ``prompt_cache_key``
    sends the trace id as OpenAI's cache-routing key (servers that do not know it ignore it);
    ``cache_prompt`` asks llama.cpp's server to reuse the prompt prefix its slot holds;
    ``tool_prefill`` steers llama.cpp into calling tools (:mod:`longhaul.llm.tool_prefill`);
    ``max_tokens`` bounds an answer whose request sets none (``models.local.max_tokens``)."""

    provider = "openai"

    def __init__(
        self,
        *,
        named_tool_choice: bool = True,
        prompt_cache_key: bool = True,
        cache_prompt: bool = False,
        tool_prefill: ToolPrefill | None = None,
        max_tokens: int | None = None,
    ) -> None:
        self.named_tool_choice = named_tool_choice
        self.prompt_cache_key = prompt_cache_key
        self.cache_prompt = cache_prompt
        self.tool_prefill = tool_prefill
        self.max_tokens = max_tokens

    def auth_headers(self, api_key: str | None) -> dict[str, str]:
        return {"Authorization": f"Bearer {api_key}"} if api_key else {}

    def build(self, model_id: str, request: ModelRequest) -> HttpCall:
        leading, rest = split_system(prepare_history(request.messages, self.provider))
        system = system_prompt(request, leading)
        messages = [{"role": "system", "content": system.stable}] if system.stable else []
        messages.extend(_wire_message(message) for message in rest)
        if system.volatile:  # after the conversation: the cached prefix stays byte-identical
            messages.append({"role": "user", "content": context_note(system.volatile)})
        body: dict[str, Any] = {
            "model": model_id,
            "messages": messages,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        trace_id = request.metadata.get("trace_id")
        if self.prompt_cache_key and trace_id:
            body["prompt_cache_key"] = str(trace_id)  # routes a trace's calls to one cache
        if self.cache_prompt:
            body["cache_prompt"] = True
        if request.tools:
            body["tools"] = [tool.to_openai() for tool in request.tools]
            self._tool_choice(body, request)
            if request.parallel_tool_calls is not None:
                body["parallel_tool_calls"] = request.parallel_tool_calls
            if self.tool_prefill is not None:
                self.tool_prefill.steer(body, request)
        if request.temperature is not None:
            body["temperature"] = request.temperature
        _sampling(body, request)
        max_tokens = request.max_tokens if request.max_tokens is not None else self.max_tokens
        if max_tokens is not None:
            reasoning = model_id.startswith(_REASONING_PREFIXES)
            body["max_completion_tokens" if reasoning else "max_tokens"] = max_tokens
        if request.response_schema is not None:
            body["response_format"] = _response_format(request)
        return HttpCall("chat/completions", body)

    def _tool_choice(self, body: dict[str, Any], request: ModelRequest) -> None:
        choice = request.tool_choice
        if isinstance(choice, dict):
            name = choice["name"]
            if self.named_tool_choice:
                body["tool_choice"] = {"type": "function", "function": {"name": name}}
            else:
                body["tools"] = [tool.to_openai() for tool in request.tools if tool.name == name]
                body["tool_choice"] = "required"
        elif choice is not None:
            body["tool_choice"] = choice

    async def decode(
        self, events: AsyncIterator[SSEEvent], assembler: ResponseAssembler
    ) -> AsyncGenerator[StreamEvent, None]:
        slots = _CallSlots()
        finish_reason: str | None = None
        usage: Usage | None = None
        done = False
        async for event in events:
            if event.data == "[DONE]":
                done = True
                break
            chunk = decode_json(event.data, self.provider)
            if chunk.get("error"):
                raise _stream_error(chunk["error"])
            if chunk.get("usage"):
                usage = _usage(chunk["usage"])
            for choice in chunk.get("choices") or ():
                if choice.get("index", 0) != 0:
                    continue
                delta = choice.get("delta") or {}
                if delta.get("content"):
                    yield assembler.text(delta["content"])
                for fragment in delta.get("tool_calls") or ():
                    call_id = fragment.get("id")
                    function = fragment.get("function") or {}
                    arguments = function.get("arguments") or ""
                    yield assembler.tool_call(
                        slots.index_for(fragment.get("index", 0), call_id),
                        id=call_id,
                        name=function.get("name"),
                        # a few servers send whole calls with arguments as an object
                        arguments=arguments
                        if isinstance(arguments, str)
                        else json.dumps(arguments),
                    )
                finish_reason = choice.get("finish_reason") or finish_reason
        if not done and finish_reason is None:
            raise ModelError("openai: stream ended before the response finished", retryable=True)
        yield assembler.finish(finish_reason=finish_reason or "stop", usage=usage)
