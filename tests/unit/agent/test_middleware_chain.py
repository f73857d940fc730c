"""Chain order rules, the default chain, config re-ordering, and a custom middleware."""

from __future__ import annotations

from pathlib import Path

import pytest
from longhaul.agent import DEFAULT_ORDER, Middleware, Step, Turn, TurnOutcome, default_middleware
from longhaul.agent.invocation import ToolInvocation
from longhaul.agent.middleware import ModelHandler, ToolHandler
from longhaul.agent.tools import ToolReply
from longhaul.domain.config import MiddlewareEntry, PipelineConfig
from longhaul.llm.types import ModelRequest, ModelResponse

from tests.unit.agent.support import (
    MemorySink,
    answer,
    call,
    calls,
    make_engine,
    new_state,
    scripted,
)


class Recorder(Middleware):
    def __init__(self, label: str, log: list[str]) -> None:
        self.label = label
        self.log = log

    async def before_agent(self, turn: Turn) -> None:
        self.log.append(f"before_agent {self.label}")

    async def before_model(self, turn: Turn, request: ModelRequest) -> None:
        self.log.append(f"before_model {self.label}")

    async def wrap_model_call(
        self, turn: Turn, request: ModelRequest, call_next: ModelHandler
    ) -> ModelResponse:
        self.log.append(f"wrap_model in {self.label}")
        response = await call_next(request)
        self.log.append(f"wrap_model out {self.label}")
        return response

    async def after_model(self, turn: Turn, step: Step) -> None:
        self.log.append(f"after_model {self.label}")

    async def wrap_tool_call(
        self, turn: Turn, invocation: ToolInvocation, call_next: ToolHandler
    ) -> ToolReply:
        self.log.append(f"wrap_tool in {self.label}")
        reply = await call_next(invocation)
        self.log.append(f"wrap_tool out {self.label}")
        return reply

    async def after_agent(self, turn: Turn, outcome: TurnOutcome) -> None:
        self.log.append(f"after_agent {self.label}")


async def test_hook_order_rules(tmp_path: Path) -> None:
    log: list[str] = []
    chain = [Recorder("A", log), Recorder("B", log)]
    model, _ = scripted(calls(call("glob", {"pattern": "*"})), answer("ok"))
    state = new_state()
    await make_engine(tmp_path, middleware=chain).run_turn(state, MemorySink(state), model=model)
    first_step = log[: log.index("wrap_tool in A")]
    assert first_step == [
        "before_agent A",
        "before_agent B",
        "before_model A",
        "before_model B",
        "wrap_model in A",
        "wrap_model in B",
        "wrap_model out B",
        "wrap_model out A",
        "after_model B",
        "after_model A",
    ]
    tool_part = log[log.index("wrap_tool in A") : log.index("wrap_tool out A") + 1]
    assert tool_part == ["wrap_tool in A", "wrap_tool in B", "wrap_tool out B", "wrap_tool out A"]
    assert log[-2:] == ["after_agent B", "after_agent A"]


def test_default_chain_is_the_design_order() -> None:
    names = [m.config_name() for m in default_middleware()]
    assert names == list(DEFAULT_ORDER)
    assert names == [
        "DanglingToolCall", "ToolErrorHandling", "ToolSchemaValidation",
        "Guardrail", "Summarization", "ContextInjection", "PromptCache", "TokenUsage",
        "SubagentLimit", "LoopDetection", "Clarification", "ExperienceRecall", "ToolApproval",
    ]  # fmt: skip


def test_config_switches_off_and_reorders_in_place() -> None:
    config = PipelineConfig(
        middleware=[
            MiddlewareEntry(name="loop_detection", enabled=False),
            MiddlewareEntry(name="PromptCache"),
            MiddlewareEntry(name="summarization"),
        ]
    )
    names = [m.config_name() for m in default_middleware(config)]
    assert "LoopDetection" not in names
    # PromptCache and Summarization swap slots; nothing else moves.
    assert names[4:7] == ["PromptCache", "ContextInjection", "Summarization"]
    assert names[:4] == list(DEFAULT_ORDER[:4])
    assert names[-3:] == ["Clarification", "ExperienceRecall", "ToolApproval"]


def test_unknown_or_repeated_names_are_config_errors() -> None:
    with pytest.raises(ValueError, match="TraceContext is no longer a middleware"):
        default_middleware(PipelineConfig(middleware=[MiddlewareEntry(name="trace_context")]))
    with pytest.raises(ValueError, match="unknown middleware"):
        default_middleware(PipelineConfig(middleware=[MiddlewareEntry(name="Nope")]))
    twice = [MiddlewareEntry(name="Guardrail"), MiddlewareEntry(name="guardrail")]
    with pytest.raises(ValueError, match="twice"):
        default_middleware(PipelineConfig(middleware=twice))


class AuditLog(Middleware):
    """A user middleware: records every tool call and its outcome, touching nothing else."""

    name = "AuditLog"

    def __init__(self) -> None:
        self.entries: list[tuple[str, str, str | None]] = []

    async def wrap_tool_call(
        self, turn: Turn, invocation: ToolInvocation, call_next: ToolHandler
    ) -> ToolReply:
        reply = await call_next(invocation)
        code = getattr(reply, "error_code", None)
        self.entries.append((turn.trace_id, invocation.name, code))
        return reply


async def test_audit_log_middleware_without_touching_the_engine(tmp_path: Path) -> None:
    audit = AuditLog()
    chain = default_middleware()
    # Just outside ToolErrorHandling: it sees every call's final answer, failures included.
    chain.insert(DEFAULT_ORDER.index("ToolErrorHandling"), audit)
    model, _ = scripted(
        calls(call("glob", {"pattern": "*"}), call("read", {"path": "missing.txt"})),
        answer("ok"),
    )
    state = new_state()
    outcome = await make_engine(tmp_path, middleware=chain).run_turn(
        state, MemorySink(state), model=model
    )
    assert outcome.end == "completed"
    assert audit.entries == [("t_test", "glob", None), ("t_test", "read", "not_found")]
