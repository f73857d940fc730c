"""``scripted:auto``: exercise every offered tool once, then answer.

Each turn calls the first offered tool that no assistant message in the conversation has
called yet, with deterministic schema-valid arguments; once all were called it answers with a
summary of the tool results (or, when the request asks for structured output, with an
instance of the response schema). This drives a whole agent loop offline and repeatably.

Tools that wait for a person (``ask_human``) are called only when nothing else is offered
(``tools: ["ask_human"]`` tries the reply flow offline): an offline run with the default tool
set — ``make run`` without a provider — must finish on its own, not park itself (and its
parent) waiting for a reply nobody is expected to give.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from longhaul.domain.messages import content_text
from longhaul.llm.scripted.schema_sample import sample_schema
from longhaul.llm.types import ChatMessage, ModelRequest

_SNIPPET = 200
WAITS_FOR_A_PERSON = frozenset({"ask_human"})


def _called(messages: Sequence[ChatMessage]) -> dict[str, str]:
    """Call id -> tool name, for every call an assistant made."""
    return {
        str(call.get("id")): str(call.get("function", {}).get("name"))
        for message in messages
        if message.get("role") == "assistant"
        for call in message.get("tool_calls") or ()
    }


def _summary(messages: Sequence[ChatMessage]) -> str:
    names = _called(messages)
    results = [
        f"- {names.get(str(m.get('tool_call_id')), 'tool')}: "
        f"{content_text(m.get('content'))[:_SNIPPET]}"
        for m in messages
        if m.get("role") == "tool"
    ]
    if results:
        return "All tools were called. Results:\n" + "\n".join(results)
    users = [content_text(m.get("content")) for m in messages if m.get("role") == "user"]
    last = users[-1][:_SNIPPET] if users else ""
    return f"scripted:auto has no tools to call. Last request: {last}".rstrip()


def auto_turn(request: ModelRequest) -> dict[str, Any]:
    called = set(_called(request.messages).values())
    skipped = (
        WAITS_FOR_A_PERSON
        if any(tool.name not in WAITS_FOR_A_PERSON for tool in request.tools)
        else frozenset()
    )
    for tool in request.tools:
        if tool.name not in called and tool.name not in skipped:
            arguments = sample_schema(tool.parameters)
            return {"tool_calls": [{"name": tool.name, "arguments": arguments}]}
    if request.response_schema is not None:
        return {"content": json.dumps(sample_schema(request.response_schema))}
    return {"content": _summary(request.messages)}
