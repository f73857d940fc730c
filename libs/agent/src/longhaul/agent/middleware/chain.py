"""``MiddlewareChain``: applies a middleware list with the order rules of ``base``."""

from __future__ import annotations

from collections.abc import Sequence

from longhaul.agent.contract import TurnOutcome
from longhaul.agent.invocation import ToolInvocation
from longhaul.agent.middleware.base import Middleware, ModelHandler, ToolHandler
from longhaul.agent.tools.result import ToolReply
from longhaul.agent.turn import Step, Turn
from longhaul.llm.types import ModelRequest, ModelResponse


class MiddlewareChain:
    def __init__(self, middleware: Sequence[Middleware]) -> None:
        self.middleware = list(middleware)

        def having(hook: str) -> list[Middleware]:
            return [m for m in self.middleware if m.implements(hook)]

        self._before_agent = having("before_agent")
        self._before_model = having("before_model")
        self._wrap_model = having("wrap_model_call")
        self._after_model = list(reversed(having("after_model")))
        self._wrap_tool = having("wrap_tool_call")
        self._after_agent = list(reversed(having("after_agent")))

    async def before_agent(self, turn: Turn) -> None:
        for m in self._before_agent:
            await m.before_agent(turn)

    async def before_model(self, turn: Turn, request: ModelRequest) -> None:
        for m in self._before_model:
            await m.before_model(turn, request)
            if turn.stop_reason is not None:
                return

    async def after_model(self, turn: Turn, step: Step) -> None:
        for m in self._after_model:
            await m.after_model(turn, step)

    async def after_agent(self, turn: Turn, outcome: TurnOutcome) -> None:
        for m in self._after_agent:
            await m.after_agent(turn, outcome)

    def model_handler(self, turn: Turn, innermost: ModelHandler) -> ModelHandler:
        """``innermost`` wrapped by every ``wrap_model_call``, the first one outermost."""
        handler = innermost
        for m in reversed(self._wrap_model):
            handler = _bind_model(m, turn, handler)
        return handler

    def tool_handler(self, turn: Turn, innermost: ToolHandler) -> ToolHandler:
        handler = innermost
        for m in reversed(self._wrap_tool):
            handler = _bind_tool(m, turn, handler)
        return handler


def _bind_model(m: Middleware, turn: Turn, call_next: ModelHandler) -> ModelHandler:
    async def handler(request: ModelRequest) -> ModelResponse:
        return await m.wrap_model_call(turn, request, call_next)

    return handler


def _bind_tool(m: Middleware, turn: Turn, call_next: ToolHandler) -> ToolHandler:
    async def handler(invocation: ToolInvocation) -> ToolReply:
        return await m.wrap_tool_call(turn, invocation, call_next)

    return handler
