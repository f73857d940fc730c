"""Anthropic Messages API.

The system prompt holds only stable text, so the tools and the system prompt form a prefix
that is byte-identical across a run's steps; volatile context (the time, recalled memory, the
inbox note) is appended as a ``<context>`` note to the last user turn, after the whole
conversation. When the request allows caching, rolling ``cache_control`` breakpoints go on the
last tool, the system prompt and the last two user turns (Anthropic allows four). Thinking
blocks and their signatures are kept in ``provider_fields["anthropic"]["thinking"]`` and
replayed ahead of the text and tool_use blocks of the same assistant turn, as the API requires
for extended thinking.
"""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator, AsyncIterator
from dataclasses import dataclass
from typing import Any

from longhaul.llm.alternation import Image, RoleGroup, group_by_role
from longhaul.llm.arguments import arguments_object
from longhaul.llm.assembly import ResponseAssembler
from longhaul.llm.http_model import HttpCall, decode_json
from longhaul.llm.ids import own_provider_fields, prepare_history
from longhaul.llm.prompt import context_note, split_system, system_prompt
from longhaul.llm.sse import SSEEvent
from longhaul.llm.types import ModelError, ModelRequest, StreamEvent, Usage

API_VERSION = "2023-06-01"
DEFAULT_MAX_TOKENS = 4096
EPHEMERAL = {"type": "ephemeral"}
_FINISH = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "tool_use": "tool_calls",
    "max_tokens": "length",
    "refusal": "content_filter",
}
_RETRYABLE_ERRORS = frozenset(
    {"overloaded_error", "api_error", "rate_limit_error", "timeout_error"}
)


HISTORY_BREAKPOINTS = 2
"""Rolling breakpoints on the last user turns: this request writes the newest, the next
request (one turn longer) reads it. With tools and system that is Anthropic's maximum of 4."""


def _breakpoints(body: dict[str, Any]) -> None:
    """``cache_control`` on the last tool, the system prompt and the last user turns."""
    if body.get("tools"):
        body["tools"][-1]["cache_control"] = EPHEMERAL
    if body.get("system"):
        body["system"][-1]["cache_control"] = EPHEMERAL
    users = [m for m in body["messages"] if m["role"] == "user" and m["content"]]
    for message in users[-HISTORY_BREAKPOINTS:]:
        message["content"][-1]["cache_control"] = EPHEMERAL


def _append_user_text(messages: list[dict[str, Any]], text: str) -> None:
    if messages and messages[-1]["role"] == "user":
        messages[-1]["content"].append({"type": "text", "text": text})
    else:
        messages.append({"role": "user", "content": [{"type": "text", "text": text}]})


def _image(image: Image) -> dict[str, Any]:
    """An image block: base64 for a data URL, else the URL for Anthropic to fetch."""
    inline = image.inline
    if inline is not None:
        media_type, data = inline
        return {
            "type": "image",
            "source": {"type": "base64", "media_type": media_type, "data": data},
        }
    return {"type": "image", "source": {"type": "url", "url": image.url}}


def _render(turn: RoleGroup) -> dict[str, Any]:
    if turn.role == "user":
        blocks: list[dict[str, Any]] = []
        for result in turn.tool_results:
            block: dict[str, Any] = {"type": "tool_result", "tool_use_id": result.call_id}
            if result.content:
                block["content"] = result.content
            if result.is_error:
                block["is_error"] = True
            blocks.append(block)
        blocks.extend(_image(image) for image in turn.images)
        blocks.extend({"type": "text", "text": text} for text in turn.texts)
        return {"role": "user", "content": blocks}
    blocks = [
        block
        for message in turn.messages
        for block in own_provider_fields(message, "anthropic").get("thinking", [])
    ]
    blocks.extend({"type": "text", "text": text} for text in turn.texts)
    blocks.extend(
        {
            "type": "tool_use",
            "id": call.id,
            "name": call.name,
            "input": arguments_object(call.arguments),
        }
        for call in turn.tool_calls
    )
    return {"role": "assistant", "content": blocks}


def _usage(raw: dict[str, Any], usage: Usage | None) -> Usage | None:
    """Fold a usage report into ``usage``. Anthropic's ``input_tokens`` excludes cached
    tokens; ours includes them (as OpenAI's does), with the cached parts broken out."""
    fresh = raw.get("input_tokens")
    written = raw.get("cache_creation_input_tokens")
    read = raw.get("cache_read_input_tokens")
    output = raw.get("output_tokens")
    if fresh is None and written is None and read is None and output is None:
        return usage
    usage = usage or Usage()
    if fresh is not None or written is not None or read is not None:
        usage.cache_write_tokens = written or 0
        usage.cache_read_tokens = read or 0
        usage.prompt_tokens = (fresh or 0) + usage.cache_write_tokens + usage.cache_read_tokens
    if output is not None:
        usage.completion_tokens = output
    return usage


def _tool_choice(choice: str | dict[str, str] | None) -> dict[str, Any] | None:
    """Ours to Anthropic's; ``none`` is its own type there too. (The Messages API has no
    ``seed``: a seeded request is sent without one.)"""
    if isinstance(choice, dict):
        return {"type": "tool", "name": choice["name"]}
    return {"auto": {"type": "auto"}, "required": {"type": "any"}, "none": {"type": "none"}}.get(
        choice or ""
    )


@dataclass
class _Block:
    kind: str
    tool_index: int = -1
    start_input: Any = None
    streamed_input: bool = False
    thinking: dict[str, Any] | None = None


class AnthropicCodec:
    provider = "anthropic"

    def auth_headers(self, api_key: str | None) -> dict[str, str]:
        headers = {"anthropic-version": API_VERSION}
        if api_key:
            headers["x-api-key"] = api_key
        return headers

    def build(self, model_id: str, request: ModelRequest) -> HttpCall:
        leading, rest = split_system(prepare_history(request.messages, self.provider))
        # a strict schema keeps to the subset Anthropic enforces: sent as output_config;
        # any other is told in prose (and checked by whoever asked for it)
        native_schema = request.response_schema is not None and request.schema_strict
        system = system_prompt(request, leading, instruct_schema=not native_schema)
        messages = [_render(turn) for turn in group_by_role(rest)]
        body: dict[str, Any] = {
            "model": model_id,
            "max_tokens": request.max_tokens or DEFAULT_MAX_TOKENS,
            "messages": messages,
            "stream": True,
        }
        if system.stable:
            body["system"] = [{"type": "text", "text": system.stable}]
        if request.tools:
            body["tools"] = [
                {"name": tool.name, "input_schema": tool.parameters}
                | ({"description": tool.description} if tool.description else {})
                for tool in request.tools
            ]
            choice = _tool_choice(request.tool_choice)
            if request.parallel_tool_calls is False:
                choice = choice or {"type": "auto"}
                if choice["type"] != "none":
                    choice["disable_parallel_tool_use"] = True
            if choice is not None:
                body["tool_choice"] = choice
        if native_schema:
            body["output_config"] = {
                "format": {"type": "json_schema", "schema": request.response_schema}
            }
        if request.cache_system:
            _breakpoints(body)
        if system.volatile:  # after every breakpoint: it never invalidates a cached prefix
            _append_user_text(messages, context_note(system.volatile))
        if request.temperature is not None:
            body["temperature"] = request.temperature
        if request.top_p is not None:
            body["top_p"] = request.top_p
        if request.stop:
            body["stop_sequences"] = request.stop
        return HttpCall("v1/messages", body)

    async def decode(
        self, events: AsyncIterator[SSEEvent], assembler: ResponseAssembler
    ) -> AsyncGenerator[StreamEvent, None]:
        usage: Usage | None = None
        stop_reason: str | None = None
        blocks: dict[int, _Block] = {}
        tools = 0
        async for event in events:
            data = decode_json(event.data, self.provider)
            kind = data.get("type", event.event)
            if kind == "message_start":
                usage = _usage(data.get("message", {}).get("usage") or {}, usage)
            elif kind == "content_block_start":
                raw = data.get("content_block", {})
                block = blocks[data.get("index", 0)] = _Block(kind=raw.get("type", ""))
                if block.kind == "tool_use":
                    block.tool_index, tools = tools, tools + 1
                    block.start_input = raw.get("input")
                    yield assembler.tool_call(
                        block.tool_index, id=raw.get("id"), name=raw.get("name")
                    )
                elif block.kind in ("thinking", "redacted_thinking"):
                    block.thinking = dict(raw)
                elif raw.get("text"):
                    yield assembler.text(raw["text"])
            elif kind == "content_block_delta":
                block = blocks.setdefault(data.get("index", 0), _Block(kind="text"))
                delta = data.get("delta", {})
                dtype = delta.get("type")
                if dtype == "text_delta" and delta.get("text"):
                    yield assembler.text(delta["text"])
                elif (
                    dtype == "input_json_delta"
                    and block.kind == "tool_use"
                    and delta.get("partial_json")
                ):
                    block.streamed_input = True
                    yield assembler.tool_call(block.tool_index, arguments=delta["partial_json"])
                elif dtype == "thinking_delta" and block.thinking is not None:
                    block.thinking["thinking"] = block.thinking.get("thinking", "") + delta.get(
                        "thinking", ""
                    )
                elif dtype == "signature_delta" and block.thinking is not None:
                    block.thinking["signature"] = delta.get("signature", "")
            elif kind == "content_block_stop":
                block = blocks.setdefault(data.get("index", 0), _Block(kind="text"))
                if block.kind == "tool_use" and block.start_input and not block.streamed_input:
                    yield assembler.tool_call(
                        block.tool_index, arguments=json.dumps(block.start_input)
                    )
            elif kind == "message_delta":
                stop_reason = data.get("delta", {}).get("stop_reason") or stop_reason
                usage = _usage(data.get("usage") or {}, usage)
            elif kind == "message_stop":
                break
            elif kind == "error":
                error = data.get("error", {})
                raise ModelError(
                    f"anthropic: {error.get('type', 'error')}: {error.get('message', '')}",
                    retryable=error.get("type") in _RETRYABLE_ERRORS,
                )
        else:
            raise ModelError("anthropic: stream ended before message_stop", retryable=True)
        thinking = [b.thinking for _, b in sorted(blocks.items()) if b.thinking is not None]
        yield assembler.finish(
            finish_reason=_FINISH.get(stop_reason or "", stop_reason or "stop"),
            usage=usage,
            provider_fields={self.provider: {"thinking": thinking}} if thinking else None,
        )
