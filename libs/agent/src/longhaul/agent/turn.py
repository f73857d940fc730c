"""``Turn`` and ``Step``: what middleware sees of the turn and of one model step.

A turn is one executor lease on one trace. Middleware objects are shared by every turn an
executor runs, so anything a middleware must remember during a turn lives here
(:meth:`Turn.local`), never on the middleware itself.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from longhaul.agent.batch import Batch
from longhaul.agent.contract import (
    EventSink,
    LiveCallback,
    LiveUpdate,
    StopSignal,
    WriteBehindSink,
)
from longhaul.agent.env import AgentEnv
from longhaul.agent.history import History
from longhaul.agent.presets import Preset
from longhaul.agent.resources import TurnResources
from longhaul.agent.skills import SkillIndex
from longhaul.agent.tools.context import ToolContext
from longhaul.agent.tools.registry import ToolRegistry
from longhaul.agent.tools.result import ToolResult
from longhaul.agent.turn_settings import TurnSettings
from longhaul.domain.config import PipelineConfig
from longhaul.domain.events import ModelParams, NamedTool, OutputSchema, TraceEvent, Usage
from longhaul.domain.experiences import Experience
from longhaul.domain.state import TraceState
from longhaul.llm.types import Model, ModelRequest, ModelResponse, ToolCall, ToolSpec

T = TypeVar("T")


class Turn:
    """One turn's context. ``state`` is live: every emit folds into it before returning."""

    def __init__(
        self,
        *,
        state: TraceState,
        sink: EventSink,
        model: Model,
        utility_model: Model,
        config: PipelineConfig,
        env: AgentEnv,
        tools: ToolRegistry,
        live: LiveCallback | None,
        stop_signal: StopSignal | None = None,
        fallback: Sequence[Model] = (),
    ) -> None:
        self.state = state
        self.sink = sink
        self._behind = sink if isinstance(sink, WriteBehindSink) else None
        self.model = model
        self.fallback = list(fallback)
        """The models to move to, in order, when ``model``'s provider fails (``fallback``)."""
        self.utility_model = utility_model
        self.config = config
        self.env = env
        self.live = live
        self.stop_signal = stop_signal
        """Set by the shell when a stop request arrives: the model call in flight is cancelled
        (``engine.interrupt``); ``None``: the engine sees stops only in ``state``."""
        self.history = History(state, once=config.offload.enable)
        self.resources = TurnResources()
        """Opened by tools for the rest of the turn (a browser); the engine closes them."""
        self.images: dict[str, str] = {}
        """Image references resolved this turn (``longhaul.agent.images``): digest → data URL."""
        self.all_tools = tools
        self._settings: TurnSettings | None = None
        self.reflect: Callable[[], Awaitable[tuple[list[str], str | None]]] | None = None
        """A reflection on a side branch, ending in experiences (set by the engine's loop; level-2
        compaction runs it first when the trace's owner has an experience store, and a
        completing run when ``memory.capture_on_completion`` is on): (ids, why none)."""
        self.summarise: Callable[[int], Awaitable[str]] | None = None
        """Level-2 compaction's summary of the main path's first N messages, written on a
        side branch (set by the engine's loop; raises ``ModelError`` when it fails)."""
        self.saved_tokens: dict[str, int] = {}
        """This step's estimated savings by kind, set by the middleware that made them (the
        step's usage carries them: ``Usage.saved_tokens``)."""
        self.memory: list[str] = []
        """Volatile prompt text (recalled experiences, notes): after the cacheable prefix."""
        self.steps = 0
        self.stop_reason: str | None = None
        self.budget_ask: str | None = None
        """Set by a budget check: the turn waits (``budget``) with this detail instead of
        calling the model."""
        self._locals: dict[int, Any] = {}
        self._pool: list[Experience] | None = None

    @property
    def trace_id(self) -> str:
        return self.state.trace_id

    @property
    def settings(self) -> TurnSettings:
        """Resolved and pinned once when the turn starts (``run_context.settle``), before any
        hook, then only read: there is no placeholder to read before."""
        if self._settings is None:
            raise RuntimeError("the turn's settings were read before they were resolved")
        return self._settings

    @settings.setter
    def settings(self, settings: TurnSettings) -> None:
        if self._settings is not None:
            raise RuntimeError("the turn's settings are resolved once")
        self._settings = settings

    # The settings, as the engine and middleware read them.

    @property
    def preset(self) -> Preset:
        return self.settings.preset

    @property
    def tools(self) -> ToolRegistry:
        return self.settings.tools

    @property
    def tool_specs(self) -> tuple[ToolSpec, ...] | None:
        return self.settings.tool_specs

    @property
    def skills(self) -> SkillIndex:
        return self.settings.skills

    @property
    def working_dir(self) -> Path:
        return self.settings.working_dir

    @property
    def system_prompt(self) -> str:
        return self.settings.system_prompt

    @property
    def max_iterations(self) -> int:
        return self.settings.max_iterations

    @property
    def max_continuations(self) -> int:
        return self.settings.max_continuations

    @property
    def temperature(self) -> float | None:
        return self.settings.temperature

    @property
    def model_params(self) -> ModelParams:
        return self.settings.model_params

    async def emit(
        self, events: Sequence[TraceEvent] | Batch, *, behind: bool = False, hold: bool = False
    ) -> None:
        """Hand ``events`` to the sink. ``behind``: the append may still be in flight on
        return (:class:`WriteBehindSink`; a plain sink appends at once); only for an emit
        followed by work with no outside effect, since :meth:`settle` must come first.
        ``hold``: not even sent yet, but appended with the next emit in one batch (one round
        trip for a step); only for an emit followed by work a crash would simply repeat."""
        items = events.events if isinstance(events, Batch) else events
        if not items:
            return
        if hold and self._behind is not None:
            await self._behind.hold(list(items))
        elif behind and self._behind is not None:
            await self._behind.emit_behind(list(items))
        else:
            await self.sink.emit(list(items))

    def is_read_only(self, call: ToolCall) -> bool:
        """Whether ``call`` names a tool that changes nothing outside the trace."""
        tool = self.tools.get(call.name)
        return tool is not None and tool.read_only

    async def settle(self) -> None:
        """Wait for an append left in flight: before anything with an effect outside the
        process (a tool call)."""
        if self._behind is not None:
            await self._behind.settle()

    def batch(self) -> Batch:
        return Batch(self.state)

    def stop(self, reason: str) -> None:
        """Ask the engine to stop the trace (with ``Stopped(reason)``) before its next action."""
        self.stop_reason = self.stop_reason or reason

    def ask_budget(self, detail: str) -> None:
        """Ask a person before the next model call: a raise or a stop (``budget`` wait)."""
        self.budget_ask = self.budget_ask or detail

    async def notify(self, update: LiveUpdate) -> None:
        if self.live is not None:
            await self.live(update)

    def local(self, owner: object, factory: Callable[[], T]) -> T:
        """Per-turn storage for ``owner`` (a middleware), created on first use."""
        key = id(owner)
        if key not in self._locals:
            self._locals[key] = factory()
        value: T = self._locals[key]
        return value

    def tool_context(self, call_id: str, tool: str = "") -> ToolContext:
        """The context of one call of ``tool`` (its secrets, and only its)."""
        return ToolContext(
            secrets=self.env.tool_settings.secrets.get(tool, {}),
            trace_id=self.trace_id,
            tool_call_id=call_id,
            working_dir=self.working_dir,
            state=self.state,
            goal_id=self.state.goals.focus,
            workspace=self.env.workspace,
            settings=self.env.tool_settings,
            skills=self.skills,
            messenger=self.env.messenger,
            experiences=self.env.experiences,
            resources=self.resources,
        )

    async def has_experiences(self) -> bool:
        return bool(await self.experience_pool())

    async def experience_pool(self) -> list[Experience]:
        """The trace owner's experiences, read once per turn (empty without a store)."""
        if self._pool is None:
            book = self.env.experiences
            self._pool = [] if book is None else await book.list(self.state.owner)
        return self._pool

    def request(self) -> ModelRequest:
        """The next model request from the main path (middleware refines it). Its messages are
        a read-only view shared with :attr:`history`: O(1) to build, see ``History``."""
        return ModelRequest(
            model=self.model.name,
            messages=self.history.messages(),
            tools=list(self.tool_specs) if self.tool_specs is not None else self.tools.specs(),
            system_stable=self.system_prompt,
            cache_system=False,
            metadata={"trace_id": self.trace_id},
            **request_params(self.model_params, self.temperature),
            **output_params(self.settings.output_schema),
        )


def request_params(params: ModelParams, temperature: float | None) -> dict[str, Any]:
    """``ModelParams`` as :class:`ModelRequest` fields (``temperature`` is the legacy
    top-level setting, used where the params leave it unset)."""
    choice = params.tool_choice
    return {
        "temperature": params.temperature if params.temperature is not None else temperature,
        "top_p": params.top_p,
        "max_tokens": params.max_tokens,
        "seed": params.seed,
        "stop": params.stop,
        "tool_choice": {"name": choice.name} if isinstance(choice, NamedTool) else choice,
        "parallel_tool_calls": params.parallel_tool_calls,
    }


def output_params(output: OutputSchema | None) -> dict[str, Any]:
    """A trace's ``output_schema`` as :class:`ModelRequest` fields."""
    if output is None:
        return {}
    return {
        "response_schema": output.schema,
        "schema_name": output.name,
        "schema_strict": output.strict,
    }


@dataclass
class Step:
    """One model response on its way to becoming the assistant message.

    ``after_model`` hooks may fill ``usage``/``cost``, queue ``events`` (emitted right after
    the assistant message, in the same batch) and pre-answer calls in ``answered`` (those calls
    never run; the answer is appended as a synthetic tool message).
    """

    request: ModelRequest
    response: ModelResponse
    duration_ms: int
    usage: Usage | None = None
    cost: float = 0.0
    events: list[TraceEvent] = field(default_factory=list)
    answered: dict[str, ToolResult] = field(default_factory=dict)

    @property
    def calls(self) -> list[ToolCall]:
        return self.response.tool_calls


def elapsed_ms(clock: Callable[[], float], started: float) -> int:
    return max(int((clock() - started) * 1000), 0)
