"""The pinned ends of the chain: healing and tool-error handling are there whatever the
config or the middleware list says, and model-call wrappers pass on a replaced request."""

from __future__ import annotations

from pathlib import Path

import pytest
from longhaul.agent import DEFAULT_ORDER, Middleware, Turn, default_middleware
from longhaul.agent.middleware import DanglingToolCall, ModelHandler, ToolErrorHandling
from longhaul.domain import events as ev
from longhaul.domain.config import MiddlewareEntry, PipelineConfig
from longhaul.llm.types import ModelRequest, ModelResponse

from tests.unit.agent.support import (
    AgentRun,
    answer,
    assert_tool_pairs_complete,
    call,
    calls,
)


@pytest.mark.parametrize("name", ["DanglingToolCall", "tool_error_handling"])
def test_config_cannot_switch_a_framework_layer_off(name: str) -> None:
    config = PipelineConfig(middleware=[MiddlewareEntry(name=name, enabled=False)])
    with pytest.raises(ValueError, match="framework layer"):
        default_middleware(config)


def test_listing_a_framework_layer_does_not_move_it() -> None:
    config = PipelineConfig(
        middleware=[
            MiddlewareEntry(name="Clarification"),
            MiddlewareEntry(name="DanglingToolCall"),
        ]
    )
    names = [m.config_name() for m in default_middleware(config)]
    assert names == list(DEFAULT_ORDER)


class Passthrough(Middleware):
    pass


async def test_a_bare_middleware_list_still_heals_and_catches_tool_errors(tmp_path: Path) -> None:
    run = AgentRun(tmp_path, middleware=[Passthrough()])
    kinds = [type(m) for m in run.engine.middleware]
    assert kinds[:2] == [DanglingToolCall, ToolErrorHandling]
    # A turn that died after its assistant message left a call without a result.
    run.state.apply(
        ev.MessageAppended(
            sequence=2,
            parent_sequence=1,
            role="assistant",
            tool_calls=[ev.ToolCall.of(id="g1", name="glob", arguments="{}")],
            n=run.state.version + 1,
        )
    )
    outcome = await run.turn(calls(call("read", {"path": "missing.txt"}, id="r1")), answer("ok"))
    assert outcome.end == "completed"
    tools = [m for m in run.sink.of_type(ev.MessageAppended) if m.role == "tool"]
    assert [(m.tool_call_id, m.error_code) for m in tools] == [
        ("g1", "interrupted"),
        ("r1", "not_found"),
    ]
    assert_tool_pairs_complete(run.script.requests[0].messages)


class Outermost(Middleware):
    """Records the request it sends and what that request looks like once the call returns."""

    def __init__(self) -> None:
        self.sent: list[tuple[int, str]] = []
        self.after: list[tuple[int, str]] = []

    async def wrap_model_call(
        self, turn: Turn, request: ModelRequest, call_next: ModelHandler
    ) -> ModelResponse:
        self.sent.append((len(request.messages), request.system_volatile))
        response = await call_next(request)
        self.after.append((len(request.messages), request.system_volatile))
        return response


async def test_model_call_wrappers_replace_the_request_instead_of_mutating_it(
    tmp_path: Path,
) -> None:
    outer = Outermost()
    run = AgentRun(tmp_path, middleware=[outer, *default_middleware()])
    run.state.apply(
        ev.LoopWarned(tool="glob", message="you are repeating glob", n=run.state.version + 1)
    )
    await run.turn(answer("ok"))
    [provider_saw] = run.script.requests
    assert provider_saw.system_volatile.startswith("Current time")  # PromptCache's
    assert provider_saw.messages[-1]["content"] == "you are repeating glob"  # LoopDetection's
    assert outer.after == outer.sent
    assert outer.sent[0][0] == len(provider_saw.messages) - 1 and outer.sent[0][1] == ""
