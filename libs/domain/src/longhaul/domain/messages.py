"""The parts of a message every layer shares: one tool-call type, one usage type, and the
text of a content (``content_text``).

A tool call keeps the OpenAI shape it is stored in (``{"id", "type", "function": {"name",
"arguments"}}``) from the provider's parser through the event log to the API, so nothing
converts it on the way; ``name`` and ``arguments`` read through to the function part.
"""

from __future__ import annotations

import json
from typing import Any

import msgspec


def content_text(content: Any) -> str:
    """Text of an OpenAI ``content``: a string, a list of parts, or anything JSON-able."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            str(part.get("text", "")) if isinstance(part, dict) else str(part) for part in content
        )
    return json.dumps(content)


class FunctionCall(msgspec.Struct, kw_only=True, gc=False):
    name: str
    arguments: str = "{}"
    """The raw JSON text the model produced (kept verbatim even when it does not parse)."""


class ToolCall(msgspec.Struct, kw_only=True, gc=False):
    """A tool call in OpenAI shape."""

    id: str
    function: FunctionCall
    type: str = "function"

    @classmethod
    def of(cls, id: str, name: str, arguments: str = "{}") -> ToolCall:
        return cls(id=id, function=FunctionCall(name=name, arguments=arguments))

    @property
    def name(self) -> str:
        return self.function.name

    @property
    def arguments(self) -> str:
        return self.function.arguments

    def to_openai(self) -> dict[str, Any]:
        out: dict[str, Any] = msgspec.to_builtins(self)
        return out


def add_counts(a: dict[str, int], b: dict[str, int]) -> dict[str, int]:
    """Two ``{kind: tokens}`` tallies summed."""
    return {kind: a.get(kind, 0) + b.get(kind, 0) for kind in {*a, *b}}


class Usage(msgspec.Struct, kw_only=True, omit_defaults=True, gc=False):
    """Token counts of one model call. ``estimated`` marks counts we computed ourselves.
    ``saved_tokens``: prompt tokens the request did not carry thanks to each saving
    (``offload``: one-time outputs sent as their note; ``compaction``: completed goals folded,
    and at the step it ran, a level-2 summary), estimated."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    estimated: bool = False
    saved_tokens: dict[str, int] = msgspec.field(default_factory=dict)

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            prompt_tokens=self.prompt_tokens + other.prompt_tokens,
            completion_tokens=self.completion_tokens + other.completion_tokens,
            cache_read_tokens=self.cache_read_tokens + other.cache_read_tokens,
            cache_write_tokens=self.cache_write_tokens + other.cache_write_tokens,
            estimated=self.estimated or other.estimated,
            saved_tokens=add_counts(self.saved_tokens, other.saved_tokens),
        )
