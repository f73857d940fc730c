"""Tool-call ids across providers.

A trace may start on one provider and continue on another. Each provider insists on its own
id shape (OpenAI: ``call_…``, at most 40 characters; Anthropic: ``toolu_…`` in
``[a-zA-Z0-9_-]``), so before a history is sent every id that is not already in the target's
shape is rewritten. The new id is a hash of the old one, which keeps an assistant call and
its tool result paired (both map identically) and makes re-sending the same history produce
the same ids. Ids are only rewritten in the outgoing request, never in the stored log.

Provider-specific data (thinking signatures, Gemini thought signatures) lives on assistant
messages under ``provider_fields[<provider>]`` and is shown only to that provider.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from longhaul.llm.types import ChatMessage

PROVIDER_FIELDS = "provider_fields"


@dataclass(frozen=True)
class IdFormat:
    prefix: str
    max_length: int
    pattern: re.Pattern[str] = re.compile(r"^[A-Za-z0-9_-]+$")

    def accepts(self, call_id: str) -> bool:
        return (
            call_id.startswith(self.prefix)
            and len(call_id) <= self.max_length
            and self.pattern.match(call_id) is not None
        )

    def derive(self, seed: str) -> str:
        digest = hashlib.sha256(seed.encode()).hexdigest()
        return self.prefix + digest[: min(32, self.max_length - len(self.prefix))]


ID_FORMATS: dict[str, IdFormat] = {
    "openai": IdFormat(prefix="call_", max_length=40),
    "anthropic": IdFormat(prefix="toolu_", max_length=64),
}
"""Providers that read tool-call ids. Gemini has none on the wire, so its ids stay as they are."""

DEFAULT_FORMAT = ID_FORMATS["openai"]


def new_call_id(messages: Sequence[ChatMessage], *seed: object) -> str:
    """A fresh, deterministic id for a call a provider did not name (Gemini, scripted): the
    same conversation and the same call give the same id, a different conversation another."""
    history = json.dumps(list(messages), sort_keys=True, default=str)
    return DEFAULT_FORMAT.derive(history + json.dumps(seed, default=str))


def rewrite_tool_call_ids(messages: Sequence[ChatMessage], target: str) -> list[ChatMessage]:
    """Rewrite ids the ``target`` provider would reject or that belong to another provider.

    An id is kept when it already has the target's shape and was not used by an earlier
    assistant turn (some servers reuse ``call_0``; Anthropic rejects duplicates). A tool
    message takes the mapping of the nearest preceding assistant turn that made the call.
    """
    fmt = ID_FORMATS.get(target)
    if fmt is None:
        return list(messages)
    seen: set[str] = set()
    current: dict[str, str] = {}
    result: list[ChatMessage] = []
    for position, message in enumerate(messages):
        role = message.get("role")
        if role == "assistant" and message.get("tool_calls"):
            current = {}
            calls = []
            for call in message["tool_calls"]:
                old = str(call.get("id", ""))
                keep = fmt.accepts(old) and old not in seen
                new = old if keep else fmt.derive(f"{position}:{old}" if old in seen else old)
                seen.add(old)
                current[old] = new
                calls.append(call if new == old else {**call, "id": new})
            result.append({**message, "tool_calls": calls})
        elif role == "tool":
            old = str(message.get("tool_call_id", ""))
            new = current.get(old) or (old if fmt.accepts(old) else fmt.derive(old))
            result.append(message if new == old else {**message, "tool_call_id": new})
        else:
            result.append(message)
    return result


def own_provider_fields(message: ChatMessage, provider: str) -> dict[str, Any]:
    """What ``provider`` stored on this message earlier; empty for every other provider."""
    fields = message.get(PROVIDER_FIELDS) or {}
    value = fields.get(provider) if isinstance(fields, dict) else None
    return value if isinstance(value, dict) else {}


def prepare_history(messages: Sequence[ChatMessage], target: str) -> list[ChatMessage]:
    """The history as ``target`` may see it: ids in its shape, other providers' fields gone."""
    prepared = []
    for message in rewrite_tool_call_ids(messages, target):
        if PROVIDER_FIELDS in message:
            own = own_provider_fields(message, target)
            message = {k: v for k, v in message.items() if k != PROVIDER_FIELDS}
            if own:
                message[PROVIDER_FIELDS] = {target: own}
        prepared.append(message)
    return prepared
