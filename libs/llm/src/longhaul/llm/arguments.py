"""Tool-call arguments as the model sent them.

Models sometimes emit arguments that are not JSON (truncated output, a stray quote). Providers
keep such text verbatim in ``ToolCall.arguments`` instead of failing the whole turn, so that
the agent's schema-validation middleware can answer the model with ``tool_call_invalid`` and
let it try again. :func:`parse_arguments` is the one place where that text becomes a dict.
"""

from __future__ import annotations

import json
from typing import Any


class InvalidToolArguments(ValueError):
    """Tool-call arguments are not a JSON object; ``raw`` is the text the model produced."""

    def __init__(self, raw: str, reason: str) -> None:
        super().__init__(f"tool arguments are not a JSON object: {reason}")
        self.raw = raw
        self.reason = reason


def parse_arguments(raw: str) -> dict[str, Any]:
    """Decode arguments text into a dict; empty text means no arguments."""
    if not raw.strip():
        return {}
    try:
        value = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise InvalidToolArguments(raw, str(exc)) from exc
    if not isinstance(value, dict):
        raise InvalidToolArguments(raw, f"expected an object, got {type(value).__name__}")
    return value


RAW_ARGUMENTS_KEY = "_raw_arguments"
"""Key under which unparseable arguments travel to providers that demand an object."""


def arguments_object(raw: str) -> dict[str, Any]:
    """Arguments for wire formats that require an object (Anthropic ``input``, Gemini
    ``args``): the parsed dict, or the raw text wrapped so that nothing is lost on replay."""
    try:
        return parse_arguments(raw)
    except InvalidToolArguments:
        return {RAW_ARGUMENTS_KEY: raw}
