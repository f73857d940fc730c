"""DanglingToolCall (wrap_model_call): no request ever carries a tool call without a result.

A crash between an assistant message and its tool results, a stop, or a rewind can leave
calls unanswered; every provider rejects such a conversation. Before the request is sent each
missing result is appended as a real synthetic tool message, so the heal is persisted and
happens exactly once however often the turn is retried.
"""

from __future__ import annotations

import msgspec
from longhaul.agent.messages import tool_message, unfinished
from longhaul.agent.middleware.base import Middleware, ModelHandler
from longhaul.agent.turn import Turn
from longhaul.llm.types import ModelRequest, ModelResponse


class DanglingToolCall(Middleware):
    async def wrap_model_call(
        self, turn: Turn, request: ModelRequest, call_next: ModelHandler
    ) -> ModelResponse:
        pending = turn.state.unanswered_tool_calls()
        if pending:
            batch = turn.batch()
            for call in pending:
                why = (
                    f"The {call.function.name} call was interrupted before its result was recorded"
                )
                tool_message(
                    batch, call, unfinished(turn.state, call, "interrupted", why), synthetic=True
                )
            await turn.emit(batch)
            messages = turn.history.extended(request.messages, len(pending))
            request = msgspec.structs.replace(request, messages=messages)
        return await call_next(request)
