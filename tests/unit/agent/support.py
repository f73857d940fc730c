"""Test support: an in-memory sink that applies events with the pure fold, state builders,
an in-memory workspace, scripted models, and :class:`AgentRun` (trace + sink + engine, the
setup engine tests share). Nothing here imitates NATS or HTTP."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from longhaul.agent import AgentEnv, Engine, Middleware, ToolRegistry, TurnOutcome
from longhaul.agent.tools import ToolContext, ToolSettings
from longhaul.agent.workdir import trace_home
from longhaul.domain import events as ev
from longhaul.domain.config import PipelineConfig
from longhaul.domain.state import TraceState
from longhaul.llm.scripted import ScriptedModel
from longhaul.llm.types import ModelRequest, ModelResponse


class MemorySink:
    """The executor's sink without the log: applies each event to the turn's state."""

    def __init__(self, state: TraceState) -> None:
        self.state = state
        self.events: list[ev.TraceEvent] = []
        self.batches: list[list[ev.TraceEvent]] = []

    async def emit(self, events: Sequence[ev.TraceEvent]) -> None:
        self.batches.append(list(events))
        for event in events:
            event.aggregate_id = event.aggregate_id or self.state.trace_id
            self.state.apply(event)
            self.events.append(event)

    def of_type(self, kind: type[ev.TraceEvent]) -> list[Any]:
        return [event for event in self.events if isinstance(event, kind)]


class MemoryWorkspace:
    def __init__(self) -> None:
        self.data: dict[str, bytes] = {}

    async def get(self, key: str) -> bytes | None:
        return self.data.get(key)

    async def put(self, key: str, value: bytes) -> None:
        self.data[key] = value


def new_state(
    *messages: ev.InputMessage | str,
    trace_id: str = "t_test",
    config: ev.TraceConfig | None = None,
) -> TraceState:
    """A created trace whose first messages are ``messages`` (strings are user messages)."""
    inputs = [
        ev.InputMessage(role="user", content=m) if isinstance(m, str) else m for m in messages
    ]
    state = TraceState()
    state.apply(
        ev.TraceCreated(
            aggregate_id=trace_id,
            messages=inputs or [ev.InputMessage(role="user", content="do the task")],
            config=config or ev.TraceConfig(),
        )
    )
    return state


def trace_dir(working_root: Path, trace_id: str = "t_test") -> Path:
    """Where a test trace (no owner) works below ``working_root`` (created, so that a test can
    put files there first)."""
    home = trace_home(working_root, new_state(trace_id=trace_id))
    home.mkdir(parents=True, exist_ok=True)
    return home


def tool_context(
    working_dir: Path,
    *,
    state: TraceState | None = None,
    settings: ToolSettings | None = None,
    tool_call_id: str = "call_1",
    **extra: Any,
) -> ToolContext:
    trace = state or new_state()
    return ToolContext(
        trace_id=trace.trace_id,
        tool_call_id=tool_call_id,
        working_dir=working_dir,
        state=trace,
        settings=settings or ToolSettings(),
        **extra,
    )


Reply = dict[str, Any] | ModelResponse | Exception | Callable[[ModelRequest], Any]


class Script:
    """Turns answered in order (whatever the history looks like), each request recorded.

    A turn is a scripted-provider dict (``{"content"}``, ``{"tool_calls": [...]}``), a
    ``ModelResponse``, an exception to raise, or a callable of the request returning either.
    """

    def __init__(self, *turns: Reply) -> None:
        self.turns = list(turns)
        self.requests: list[ModelRequest] = []

    def __call__(self, request: ModelRequest) -> Any:
        self.requests.append(request)
        if not self.turns:
            raise AssertionError("the script ran out of turns")
        turn = self.turns.pop(0)
        if callable(turn) and not isinstance(turn, ModelResponse):
            turn = turn(request)
        if isinstance(turn, Exception):
            raise turn
        return turn


def scripted(*turns: Reply, name: str = "scripted:test") -> tuple[ScriptedModel, Script]:
    script = Script(*turns)
    return ScriptedModel(script, name=name, chunk_chars=3), script


def call(name: str, arguments: dict[str, Any] | str | None = None, id: str | None = None) -> dict:
    entry: dict[str, Any] = {"name": name, "arguments": arguments if arguments is not None else {}}
    if id is not None:
        entry["id"] = id
    return entry


def calls(*entries: dict[str, Any]) -> dict[str, Any]:
    return {"tool_calls": list(entries)}


def answer(text: str) -> dict[str, Any]:
    return {"content": text}


class FixedClock:
    """A clock that only moves when told to (throttling and durations without sleeping)."""

    def __init__(self, start: float = 1000.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


def make_engine(
    working_root: Path,
    *,
    tools: ToolRegistry | None = None,
    config: PipelineConfig | None = None,
    middleware: Sequence[Middleware] | None = None,
    **env: Any,
) -> Engine:
    env.setdefault("clock", FixedClock())
    return Engine(
        tools=tools,
        config=config,
        env=AgentEnv(working_root=working_root, **env),
        middleware=middleware,
    )


class AgentRun:
    """The setup most engine tests share: a created trace (``messages``, ``trace_config``), a
    sink that applies to it (``sink``: a :class:`MemorySink` or a subclass) and an engine over
    ``working_root`` (``engine_options`` go to :func:`make_engine`). Each :meth:`turn` runs one
    turn on the same engine, answered by scripted turns; ``script`` holds the last one's
    requests."""

    def __init__(
        self,
        working_root: Path,
        *messages: ev.InputMessage | str,
        trace_config: ev.TraceConfig | None = None,
        sink: Callable[[TraceState], MemorySink] = MemorySink,
        **engine_options: Any,
    ) -> None:
        self.state = new_state(*messages, config=trace_config)
        self.sink = sink(self.state)
        self.engine = make_engine(working_root, **engine_options)
        self.script = Script()

    async def turn(self, *turns: Reply) -> TurnOutcome:
        model, self.script = scripted(*turns)
        return await self.engine.run_turn(self.state, self.sink, model=model)


def path_roles(state: TraceState) -> list[str]:
    return [state.messages[seq].role for seq in state.path]


def assert_tool_pairs_complete(messages: Sequence[dict[str, Any]]) -> None:
    """Every assistant tool call is answered before the next non-tool message."""
    open_calls: set[str] = set()
    for position, message in enumerate(messages):
        role = message.get("role")
        if role == "tool":
            assert message.get("tool_call_id") in open_calls, (position, message)
            open_calls.discard(message["tool_call_id"])
            continue
        assert not open_calls, f"unanswered {open_calls} before message {position}: {message}"
        if role == "assistant":
            open_calls = {c["id"] for c in message.get("tool_calls") or ()}
    assert not open_calls, f"request ends with unanswered calls {open_calls}"
