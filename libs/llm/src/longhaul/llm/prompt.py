"""The provider-neutral parts of a prompt: text of a message, the system prompt.

Providers cache prompt prefixes, in the order tools → system → messages. So the system prompt
holds only stable text (``system_stable``, then any system messages the conversation starts
with) and volatile text (time, recalled memory, reminders) goes after the whole conversation,
at the end of the last user turn (:func:`context_note`): a new minute or a new memory never
invalidates the cached history.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from longhaul.domain.messages import content_text
from longhaul.llm.types import ChatMessage, ModelRequest


def split_system(messages: Sequence[ChatMessage]) -> tuple[list[str], list[ChatMessage]]:
    """Leading system messages (part of the stable prompt) and the rest of the conversation."""
    leading: list[str] = []
    for position, message in enumerate(messages):
        if message.get("role") != "system":
            return leading, list(messages[position:])
        leading.append(content_text(message.get("content")))
    return leading, []


def _join(parts: Sequence[str]) -> str:
    return "\n\n".join(part for part in parts if part)


@dataclass(frozen=True)
class SystemPrompt:
    stable: str
    volatile: str

    @property
    def text(self) -> str:
        return _join([self.stable, self.volatile])


def system_prompt(
    request: ModelRequest, leading: Sequence[str], *, instruct_schema: bool = False
) -> SystemPrompt:
    """``instruct_schema`` adds the response schema as an instruction, for providers (or
    request shapes) without native structured output."""
    volatile = [request.system_volatile]
    if instruct_schema and request.response_schema is not None:
        volatile.append(schema_instruction(request.response_schema))
    return SystemPrompt(stable=_join([request.system_stable, *leading]), volatile=_join(volatile))


def context_note(volatile: str) -> str:
    """Volatile context as the codecs append it after the conversation."""
    return f"<context>\n{volatile}\n</context>"


def schema_instruction(schema: dict[str, Any]) -> str:
    return (
        "Answer with a single JSON value and nothing else. It must validate against this "
        f"JSON schema:\n{json.dumps(schema, sort_keys=True)}"
    )


GOAL_NOTE = re.compile(r"\[Goal (\S+) (done|abandoned): [^\n]*\]\n(.*)", re.DOTALL)
"""A folded goal's note (:func:`goal_note`): its id, how it ended, its summary."""


def goal_note(goal_id: str, ended: str, title: str, summary: str | None) -> str:
    """What stands in the context for a completed goal's messages (level-1 compaction): the
    model's own summary of the goal, as an assistant message."""
    return f"[Goal {goal_id} {ended}: {title}]\n{summary or '(no summary given)'}"
