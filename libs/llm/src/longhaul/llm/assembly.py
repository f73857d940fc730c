"""Folding stream deltas into the final response.

Every provider turns its wire events into :class:`TextDelta` / :class:`ToolCallDelta`; this
module is the single place that joins them back together, so the response a caller gets at
:class:`StreamEnd` is by construction exactly what the deltas said.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from longhaul.llm.estimate import estimate_usage
from longhaul.llm.ids import new_call_id
from longhaul.llm.types import (
    ModelRequest,
    ModelResponse,
    StreamEnd,
    TextDelta,
    ToolCall,
    ToolCallDelta,
    Usage,
)


@dataclass
class _PendingCall:
    id: str | None = None
    name: str = ""
    arguments: list[str] = field(default_factory=list)


class ResponseAssembler:
    """Accumulates one response; each method returns the event to hand to the caller."""

    def __init__(self, request: ModelRequest, model: str) -> None:
        self.request = request
        self._model = model
        self._text: list[str] = []
        self._calls: dict[int, _PendingCall] = {}

    def text(self, text: str) -> TextDelta:
        self._text.append(text)
        return TextDelta(text)

    def tool_call(
        self, index: int, *, id: str | None = None, name: str | None = None, arguments: str = ""
    ) -> ToolCallDelta:
        """One fragment of call ``index``: arguments arrive in pieces; the id and name count
        once (some servers repeat them on every fragment)."""
        call = self._calls.setdefault(index, _PendingCall())
        new_id = id if id and id != call.id else None
        new_name = name if name and not call.name else None
        call.id = call.id or new_id
        call.name = call.name or new_name or ""
        if arguments:
            call.arguments.append(arguments)
        return ToolCallDelta(index=index, id=new_id, name=new_name, arguments=arguments)

    def finish(
        self,
        *,
        finish_reason: str,
        usage: Usage | None,
        provider_fields: dict[str, Any] | None = None,
    ) -> StreamEnd:
        """The final event. Without a server usage report the usage is estimated."""
        calls = []
        for ordinal, index in enumerate(sorted(self._calls)):
            pending = self._calls[index]
            arguments = "".join(pending.arguments) or "{}"
            call_id = pending.id or new_call_id(self.request.messages, ordinal, pending.name)
            calls.append(ToolCall.of(id=call_id, name=pending.name, arguments=arguments))
        response = ModelResponse(
            content="".join(self._text),
            tool_calls=calls,
            finish_reason=finish_reason,
            model=self._model,
            provider_fields=provider_fields or {},
        )
        response.usage = usage if usage is not None else estimate_usage(self.request, response)
        return StreamEnd(response)
