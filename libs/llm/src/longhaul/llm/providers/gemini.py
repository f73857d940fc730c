"""Gemini ``streamGenerateContent`` (``alt=sse``).

Gemini function calls carry no ids, so each call gets a deterministic id (a hash of the
conversation and the call's position) and results are sent back as ``functionResponse`` parts
by name, in call order. Thinking models attach a ``thoughtSignature`` to parts; the API wants
it back on the same part, so signatures are stored in ``provider_fields["gemini"]`` (per
call id, and one for the text) and re-attached when the history is replayed to Gemini.
"""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator, AsyncIterator
from typing import Any

from longhaul.llm.alternation import Image, RoleGroup, group_by_role
from longhaul.llm.arguments import arguments_object
from longhaul.llm.assembly import ResponseAssembler
from longhaul.llm.http_model import HttpCall, decode_json
from longhaul.llm.ids import new_call_id, own_provider_fields, prepare_history
from longhaul.llm.prompt import context_note, split_system, system_prompt
from longhaul.llm.sse import SSEEvent
from longhaul.llm.types import ModelError, ModelRequest, StreamEvent, Usage

_FILTERED = frozenset(
    {"SAFETY", "RECITATION", "BLOCKLIST", "PROHIBITED_CONTENT", "SPII", "IMAGE_SAFETY"}
)
_RETRYABLE_STATUSES = frozenset(
    {"UNAVAILABLE", "INTERNAL", "RESOURCE_EXHAUSTED", "DEADLINE_EXCEEDED"}
)


def _image(image: Image) -> dict[str, Any]:
    """``inlineData`` for a data URL, else ``fileData`` naming the URL."""
    inline = image.inline
    if inline is not None:
        media_type, data = inline
        return {"inlineData": {"mimeType": media_type, "data": data}}
    return {"fileData": {"mimeType": image.media_type, "fileUri": image.url}}


def _render(turn: RoleGroup) -> dict[str, Any]:
    if turn.role == "user":
        parts: list[dict[str, Any]] = [
            {
                "functionResponse": {
                    "name": result.name,
                    "response": {"error" if result.is_error else "result": result.content},
                }
            }
            for result in turn.tool_results
        ]
        parts.extend(_image(image) for image in turn.images)
        parts.extend({"text": text} for text in turn.texts)
        return {"role": "user", "parts": parts}
    signatures: dict[str, str] = {}
    text_signature = None
    for message in turn.messages:
        fields = own_provider_fields(message, "gemini")
        signatures.update(fields.get("signatures", {}))
        text_signature = text_signature or fields.get("text_signature")
    parts = [{"text": text} for text in turn.texts]
    if parts and text_signature:
        parts[0]["thoughtSignature"] = text_signature
    for call in turn.tool_calls:
        part: dict[str, Any] = {
            "functionCall": {"name": call.name, "args": arguments_object(call.arguments)}
        }
        if call.id in signatures:
            part["thoughtSignature"] = signatures[call.id]
        parts.append(part)
    return {"role": "model", "parts": parts}


def _usage(raw: dict[str, Any]) -> Usage:
    return Usage(
        prompt_tokens=raw.get("promptTokenCount") or 0,
        completion_tokens=(raw.get("candidatesTokenCount") or 0)
        + (raw.get("thoughtsTokenCount") or 0),
        cache_read_tokens=raw.get("cachedContentTokenCount") or 0,
    )


def _finish_reason(reason: str, has_calls: bool) -> str:
    if reason == "STOP":
        return "tool_calls" if has_calls else "stop"
    if reason == "MAX_TOKENS":
        return "length"
    return "content_filter" if reason in _FILTERED else reason.lower()


def _calling_config(choice: str | dict[str, str] | None) -> dict[str, Any] | None:
    """Ours to ``toolConfig.functionCallingConfig``: required is mode ANY, a named tool is
    ANY restricted to it."""
    if isinstance(choice, dict):
        return {"mode": "ANY", "allowedFunctionNames": [choice["name"]]}
    mode = {"auto": "AUTO", "required": "ANY", "none": "NONE"}.get(choice or "")
    return {"mode": mode} if mode else None


class GeminiCodec:
    provider = "gemini"

    def auth_headers(self, api_key: str | None) -> dict[str, str]:
        return {"x-goog-api-key": api_key} if api_key else {}

    def build(self, model_id: str, request: ModelRequest) -> HttpCall:
        leading, rest = split_system(prepare_history(request.messages, self.provider))
        # Gemini refuses JSON mode together with function calling: then the schema is prose.
        native_schema = request.response_schema is not None and not request.tools
        system = system_prompt(request, leading, instruct_schema=not native_schema)
        contents = [_render(turn) for turn in group_by_role(rest)]
        body: dict[str, Any] = {"contents": contents}
        if system.stable:
            body["systemInstruction"] = {"parts": [{"text": system.stable}]}
        if system.volatile:  # after the conversation, so the cached prefix stays the same
            note = {"text": context_note(system.volatile)}
            if contents and contents[-1].get("role") == "user":
                contents[-1]["parts"].append(note)
            else:
                contents.append({"role": "user", "parts": [note]})
        if request.tools:
            body["tools"] = [
                {
                    "functionDeclarations": [
                        {"name": tool.name, "parametersJsonSchema": tool.parameters}
                        | ({"description": tool.description} if tool.description else {})
                        for tool in request.tools
                    ]
                }
            ]
            calling = _calling_config(request.tool_choice)
            if calling is not None:
                body["toolConfig"] = {"functionCallingConfig": calling}
        config: dict[str, Any] = {}
        if request.temperature is not None:
            config["temperature"] = request.temperature
        if request.max_tokens is not None:
            config["maxOutputTokens"] = request.max_tokens
        if request.top_p is not None:
            config["topP"] = request.top_p
        if request.seed is not None:
            config["seed"] = request.seed
        if request.stop:
            config["stopSequences"] = request.stop
        if native_schema:
            config["responseMimeType"] = "application/json"
            config["responseJsonSchema"] = request.response_schema
        if config:
            body["generationConfig"] = config
        model = model_id.removeprefix("models/")
        return HttpCall(f"models/{model}:streamGenerateContent", body, {"alt": "sse"})

    async def decode(
        self, events: AsyncIterator[SSEEvent], assembler: ResponseAssembler
    ) -> AsyncGenerator[StreamEvent, None]:
        usage: Usage | None = None
        finish: str | None = None
        calls = 0
        signatures: dict[str, str] = {}
        text_signature: str | None = None
        async for event in events:
            chunk = decode_json(event.data, self.provider)
            if chunk.get("error"):
                error = chunk["error"]
                raise ModelError(
                    f"gemini: stream error: {error.get('message', error)}",
                    retryable=error.get("status") in _RETRYABLE_STATUSES,
                )
            if chunk.get("usageMetadata"):
                usage = _usage(chunk["usageMetadata"])
            if chunk.get("promptFeedback", {}).get("blockReason"):
                finish = "SAFETY"
            for candidate in (chunk.get("candidates") or [])[:1]:
                for part in (candidate.get("content") or {}).get("parts") or ():
                    signature = part.get("thoughtSignature")
                    if "functionCall" in part:
                        name = part["functionCall"].get("name", "")
                        arguments = json.dumps(part["functionCall"].get("args") or {})
                        call_id = new_call_id(assembler.request.messages, calls, name, arguments)
                        if signature:
                            signatures[call_id] = signature
                        yield assembler.tool_call(calls, id=call_id, name=name, arguments=arguments)
                        calls += 1
                        continue
                    if part.get("text") and not part.get("thought"):
                        yield assembler.text(part["text"])
                    if signature and text_signature is None:
                        text_signature = signature
                finish = candidate.get("finishReason") or finish
        if finish is None:
            raise ModelError("gemini: stream ended before a finishReason", retryable=True)
        fields: dict[str, Any] = {}
        if signatures:
            fields["signatures"] = signatures
        if text_signature:
            fields["text_signature"] = text_signature
        yield assembler.finish(
            finish_reason=_finish_reason(finish, calls > 0),
            usage=usage,
            provider_fields={self.provider: fields} if fields else None,
        )
