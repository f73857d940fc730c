"""OpenAI-format history regrouped into strictly alternating user/assistant role groups
(what the providers' docs call turns; ``longhaul.agent.Turn`` is an executor's run instead).

Anthropic and Gemini both want every tool result of an assistant turn inside the *next* user
turn, results before any text, and no two turns of the same role in a row. Grouping once here
keeps both providers' converters down to rendering blocks/parts.

Rules: consecutive tool messages and a user message that follows them form one user turn;
a tool result whose call is not in the preceding assistant turn cannot be sent as a result
(both APIs reject it) and becomes user text; system messages in mid-conversation become user
text; assistant messages with neither text nor calls are dropped (both APIs reject empty
content). Image parts of user messages (OpenAI ``image_url``: a ``data:`` URL or an http(s)
one) are kept as :class:`Image` on the user turn, for each provider to render its own way.
"""

from __future__ import annotations

import mimetypes
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

from longhaul.domain.messages import content_text
from longhaul.llm.types import ChatMessage, ToolCall


@dataclass
class ToolResult:
    call_id: str
    name: str
    content: str
    is_error: bool
    position: int
    """Index of the call in its assistant turn; results are kept in call order (Gemini
    pairs responses with calls by position)."""


@dataclass(frozen=True)
class Image:
    """An image part: ``url`` is a ``data:<media type>;base64,…`` URL or an http(s) one."""

    url: str

    @property
    def inline(self) -> tuple[str, str] | None:
        """``(media type, base64 data)`` of a base64 data URL, else ``None``."""
        head, comma, data = self.url.partition(",")
        if not comma or not head.startswith("data:") or not head.endswith(";base64"):
            return None
        return head[5:-7] or "application/octet-stream", data

    @property
    def media_type(self) -> str:
        inline = self.inline
        if inline is not None:
            return inline[0]
        guessed, _ = mimetypes.guess_type(self.url.split("?", 1)[0])
        return guessed or "image/jpeg"


def images_of(content: object) -> list[Image]:
    """The ``image_url`` parts of an OpenAI ``content`` list, in order."""
    if not isinstance(content, list):
        return []
    found = []
    for part in content:
        if isinstance(part, dict) and part.get("type") == "image_url":
            ref = part.get("image_url")
            url = ref.get("url") if isinstance(ref, dict) else ref
            if isinstance(url, str) and url:
                found.append(Image(url))
    return found


@dataclass
class RoleGroup:
    role: Literal["user", "assistant"]
    texts: list[str] = field(default_factory=list)
    images: list[Image] = field(default_factory=list)
    """A user turn's image parts (assistants produce none)."""
    tool_results: list[ToolResult] = field(default_factory=list)
    tool_calls: list[ToolCall] = field(default_factory=list)
    messages: list[ChatMessage] = field(default_factory=list)
    """The assistant messages this turn came from (for their ``provider_fields``)."""


def _tool_calls(message: ChatMessage) -> list[ToolCall]:
    calls = []
    for raw in message.get("tool_calls") or ():
        function = raw.get("function", {})
        arguments = function.get("arguments", "{}")
        calls.append(
            ToolCall.of(
                id=str(raw.get("id", "")),
                name=str(function.get("name", "")),
                arguments=arguments if isinstance(arguments, str) else str(arguments),
            )
        )
    return calls


def _is_error(message: ChatMessage) -> bool:
    return bool(message.get("error") or message.get("error_code") or message.get("is_error"))


def group_by_role(messages: Sequence[ChatMessage]) -> list[RoleGroup]:
    """``messages`` without the leading system messages (see ``prompt.split_system``)."""
    turns: list[RoleGroup] = []
    pending: dict[str, tuple[int, ToolCall]] = {}

    def turn(role: Literal["user", "assistant"]) -> RoleGroup:
        if not turns or turns[-1].role != role:
            turns.append(RoleGroup(role=role))
        return turns[-1]

    for message in messages:
        role = message.get("role")
        text = content_text(message.get("content"))
        if role == "assistant":
            calls = _tool_calls(message)
            if not text and not calls:
                continue
            current = turn("assistant")
            if text:
                current.texts.append(text)
            current.tool_calls.extend(calls)
            current.messages.append(message)
            pending = {call.id: (n, call) for n, call in enumerate(current.tool_calls)}
        elif role == "tool":
            call_id = str(message.get("tool_call_id", ""))
            paired = pending.pop(call_id, None)
            if paired is None:
                turn("user").texts.append(f"Result of tool call {call_id}:\n{text}")
            else:
                position, call = paired
                turn("user").tool_results.append(
                    ToolResult(call_id, call.name, text, _is_error(message), position)
                )
        else:
            prefix = "System: " if role == "system" else ""
            if text:
                turn("user").texts.append(prefix + text)
            if role == "user":
                turn("user").images.extend(images_of(message.get("content")))
    for each in turns:
        each.tool_results.sort(key=lambda result: result.position)
    return turns
