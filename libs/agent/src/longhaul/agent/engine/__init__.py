"""The engine: ``Engine`` (long-lived, one per executor) and ``run_turn`` (one call)."""

from __future__ import annotations

from collections.abc import Sequence

from longhaul.agent.contract import EventSink, LiveCallback, StopSignal, TurnOutcome
from longhaul.agent.engine.loop import TurnLoop
from longhaul.agent.env import AgentEnv
from longhaul.agent.middleware.base import Middleware
from longhaul.agent.middleware.chain import MiddlewareChain
from longhaul.agent.middleware.defaults import default_middleware
from longhaul.agent.middleware.framework import with_framework_layers
from longhaul.agent.tools.builtin import builtin_tools
from longhaul.agent.tools.registry import ToolRegistry
from longhaul.agent.turn import Turn
from longhaul.domain.config import PipelineConfig
from longhaul.domain.state import TraceState
from longhaul.llm.types import Model


class Engine:
    """Tools, pipeline config, environment and middleware, shared by every turn.

    ``tools`` is the full registry (default: the built-ins); each turn narrows it to the
    trace's preset and ``TraceConfig.tools`` / ``read_only``. ``middleware`` defaults to
    ``default_middleware(config)``; either way the framework layers are in the chain
    (``with_framework_layers``).
    """

    def __init__(
        self,
        *,
        tools: ToolRegistry | None = None,
        config: PipelineConfig | None = None,
        env: AgentEnv | None = None,
        middleware: Sequence[Middleware] | None = None,
    ) -> None:
        self.tools = tools if tools is not None else builtin_tools()
        self.config = config or PipelineConfig()
        self.env = env or AgentEnv()
        chosen = middleware if middleware is not None else default_middleware(self.config)
        self.middleware = with_framework_layers(chosen)
        self._chain = MiddlewareChain(self.middleware)

    async def run_turn(
        self,
        state: TraceState,
        sink: EventSink,
        *,
        model: Model,
        utility_model: Model | None = None,
        live: LiveCallback | None = None,
        stop_signal: StopSignal | None = None,
        fallback: Sequence[Model] = (),
    ) -> TurnOutcome:
        """Advance ``state`` until it completes, waits, stops, fails or uses up the turn's
        iterations. Every event goes through ``sink`` (which folds it into ``state``) before
        the next action; :class:`~longhaul.agent.contract.StaleState` from the sink
        propagates. ``stop_signal``, once set, cancels the model call in flight
        (:class:`~longhaul.agent.contract.StopSignalled`, ``engine.interrupt``). ``fallback``:
        the models a provider outage moves the trace to, in order (``engine.fallback``)."""
        turn = Turn(
            state=state,
            sink=sink,
            model=model,
            utility_model=utility_model or model,
            config=self.config,
            env=self.env,
            tools=self.tools,
            live=live,
            stop_signal=stop_signal,
            fallback=fallback,
        )
        try:
            return await TurnLoop(turn, self._chain).run()
        finally:
            await turn.resources.aclose()


async def run_turn(
    state: TraceState,
    sink: EventSink,
    *,
    model: Model,
    tools: ToolRegistry | None = None,
    config: PipelineConfig | None = None,
    live: LiveCallback | None = None,
    env: AgentEnv | None = None,
    middleware: Sequence[Middleware] | None = None,
    utility_model: Model | None = None,
) -> TurnOutcome:
    """One turn with a throwaway :class:`Engine` (prefer a long-lived one in services)."""
    engine = Engine(tools=tools, config=config, env=env, middleware=middleware)
    return await engine.run_turn(state, sink, model=model, utility_model=utility_model, live=live)


__all__ = ["Engine", "run_turn"]
