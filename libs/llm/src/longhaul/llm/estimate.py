"""Token estimates for when no tokenizer or server count is available.

Roughly four characters per token holds well enough for English text and JSON across the
common tokenizers; it is only used for scripted models, rate limiting and streams whose server
never reported usage, and every estimate is marked ``Usage.estimated``.
"""

from __future__ import annotations

import json
from typing import Any

from longhaul.llm.types import ModelRequest, ModelResponse, Usage

CHARS_PER_TOKEN = 4


def estimate_tokens(text: str) -> int:
    return -(-len(text) // CHARS_PER_TOKEN)


def _message_text(message: dict[str, Any]) -> str:
    content = message.get("content")
    text = content if isinstance(content, str) else json.dumps(content) if content else ""
    for call in message.get("tool_calls") or ():
        function = call.get("function", {})
        text += function.get("name", "") + str(function.get("arguments", ""))
    return text


def estimate_prompt_tokens(request: ModelRequest) -> int:
    """Everything the provider will read: system, messages and tool schemas."""
    parts = [request.system_stable, request.system_volatile]
    parts.extend(_message_text(message) for message in request.messages)
    parts.extend(json.dumps(tool.to_openai()) for tool in request.tools)
    return sum(estimate_tokens(part) for part in parts)


def estimate_completion_tokens(response: ModelResponse) -> int:
    text = response.content + "".join(c.name + c.arguments for c in response.tool_calls)
    return estimate_tokens(text)


def estimate_usage(request: ModelRequest, response: ModelResponse) -> Usage:
    return Usage(
        prompt_tokens=estimate_prompt_tokens(request),
        completion_tokens=estimate_completion_tokens(response),
        estimated=True,
    )
