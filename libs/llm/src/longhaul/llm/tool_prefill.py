"""Steering a small local model into calling tools: an assistant prefill (``models.local``).

A 135M model served by llama.cpp never opens a tool call by itself, and ``tool_choice:
required`` alone does not help: the server's grammar allows free text before the first call
and the model rambles until ``max_tokens``. What works (measured, both APIs) is ending the
request with an assistant message holding just the call opener of the chat template (e.g.
``<tool_call>\\n``) *and* ``tool_choice: required``: the grammar then constrains the rest of
the turn to the tools' schemas, and the server parses prefill plus generation into real
``tool_calls`` — whole, with ids; the stream carries nothing of the prefill itself, so there
is nothing to join back as long as the prefill is only the opener.

The prefill forces a call, so it must not be sent on every turn (the model could never answer
and the trace would only end at ``max_iterations``): it steers the first ``rounds`` tool rounds
after the latest user message, and later turns go out as the model would see them anyway.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from longhaul.llm.types import ChatMessage, ModelRequest


def tool_rounds(messages: Sequence[ChatMessage]) -> int:
    """Assistant turns that called tools since the latest user message."""
    rounds = 0
    for message in reversed(messages):
        role = message.get("role")
        if role == "user":
            break
        if role == "assistant" and message.get("tool_calls"):
            rounds += 1
    return rounds


@dataclass(frozen=True)
class ToolPrefill:
    """``text`` goes last on the wire, as an assistant message, on the first ``rounds`` tool
    rounds of a request that offers tools (and does not say ``tool_choice: none``)."""

    text: str
    rounds: int = 1

    def applies(self, request: ModelRequest) -> bool:
        return (
            bool(request.tools)
            and request.tool_choice != "none"
            and tool_rounds(request.messages) < self.rounds
        )

    def steer(self, body: dict[str, Any], request: ModelRequest) -> None:
        """Append the prefill after everything else (the volatile context note too) and make
        a call required; a named choice (already ``required`` + one tool) stays as it is."""
        if not self.applies(request):
            return
        body["messages"].append({"role": "assistant", "content": self.text})
        body["tool_choice"] = "required"
