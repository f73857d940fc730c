"""``Middleware``: one concern around the ReAct loop (DeerFlow-style hooks).

Six hooks, each optional (the base class passes through):

- ``before_agent(turn)`` — once per turn, before anything else;
- ``before_model(turn, request)`` — before each model call, may edit the request or emit;
- ``wrap_model_call(turn, request, call_next)`` — around the call, returns the response;
- ``after_model(turn, step)`` — after the response, before it is appended;
- ``wrap_tool_call(turn, invocation, call_next)`` — around each tool call;
- ``after_agent(turn, outcome)`` — once per turn, at the end.

``request.messages`` starts as a read-only view of the trace's history (``History.messages``),
shared with it: to change the messages, make a new sequence (``[*request.messages, extra]``,
or ``turn.history.extended`` for messages just emitted), and never mutate the dicts. A
``wrap_model_call`` passes ``call_next`` a replaced request (``msgspec.structs.replace``)
and leaves the one it was given alone, so what an outer layer sees is what it sent;
``before_model`` edits the request it is given (it returns nothing).

``DanglingToolCall`` and ``ToolErrorHandling`` are framework layers every chain has
(``framework``): configuration cannot switch them off.

Order: ``before_*`` run in list order, ``after_*`` in reverse, ``wrap_*`` nest with the first
in the list outermost. Middleware instances are shared across turns and traces: keep per-turn
memory in :meth:`Turn.local`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, ClassVar

from longhaul.agent.contract import TurnOutcome
from longhaul.agent.tools.result import ToolReply
from longhaul.llm.types import ModelRequest, ModelResponse

if TYPE_CHECKING:
    from longhaul.agent.invocation import ToolInvocation
    from longhaul.agent.turn import Step, Turn

ModelHandler = Callable[[ModelRequest], Awaitable[ModelResponse]]
ToolHandler = Callable[["ToolInvocation"], Awaitable[ToolReply]]


class Middleware:
    name: ClassVar[str] = ""
    """The config name (``PipelineConfig.middleware[].name``); defaults to the class name."""

    @classmethod
    def config_name(cls) -> str:
        return cls.name or cls.__name__

    async def before_agent(self, turn: Turn) -> None:
        return None

    async def before_model(self, turn: Turn, request: ModelRequest) -> None:
        return None

    async def wrap_model_call(
        self, turn: Turn, request: ModelRequest, call_next: ModelHandler
    ) -> ModelResponse:
        return await call_next(request)

    async def after_model(self, turn: Turn, step: Step) -> None:
        return None

    async def wrap_tool_call(
        self, turn: Turn, invocation: ToolInvocation, call_next: ToolHandler
    ) -> ToolReply:
        return await call_next(invocation)

    async def after_agent(self, turn: Turn, outcome: TurnOutcome) -> None:
        return None

    def implements(self, hook: str) -> bool:
        """Whether this middleware overrides ``hook`` (the chain skips pass-throughs)."""
        return getattr(type(self), hook) is not getattr(Middleware, hook)
