"""DanglingToolCall (wrap_model_call): no request ever carries a tool call without a result.

A crash between an assistant message and its tool results, a stop, or a rewind can leave
calls unanswered; every provider rejects such a conversation. Before the request is sent each
missing result is appended as a real synthetic tool message, so the heal is persisted and
happens exactly once however often the turn is retried.
"""

from __future__ import annotations

from longhaul.agent.messages import failure, tool_message
from longhaul.agent.middleware.base import Middleware, ModelHandler
from longhaul.agent.tools.subtraces import SUBTRACE_TOOLS
from longhaul.agent.turn import Turn
from longhaul.core.events import ToolCallRecord
from longhaul.llm.types import ModelRequest, ModelResponse


def _explanation(turn: Turn, call: ToolCallRecord) -> str:
    name = call.function.name
    if name in SUBTRACE_TOOLS:
        children = [info for info in turn.state.subtraces.values() if info.tool_call_id == call.id]
        if children:
            listed = ", ".join(f"{info.child_trace_id} ({info.status})" for info in children)
            return (
                f"The {name} call was interrupted before its result was recorded. Sub-trace(s) "
                f"{listed} were started for it; call {name} again with "
                f"continue_from=<sub-trace id> to continue one, or start afresh."
            )
    return f"The {name} call was interrupted before it finished; call it again if still needed."


class DanglingToolCall(Middleware):
    async def wrap_model_call(
        self, turn: Turn, request: ModelRequest, call_next: ModelHandler
    ) -> ModelResponse:
        pending = turn.state.unanswered_tool_calls()
        if pending:
            batch = turn.batch()
            for call in pending:
                tool_message(
                    batch, call, failure("interrupted", _explanation(turn, call)), synthetic=True
                )
            await turn.emit(batch)
            request.messages.extend(turn.history.tail(len(pending)))
        return await call_next(request)
