"""A turn's settings are resolved and pinned once, before any hook, and are the only settings
the engine reads: no placeholder before, no read of the live ``state.config`` after."""

from __future__ import annotations

from pathlib import Path

import pytest
from longhaul.agent.middleware.base import Middleware
from longhaul.agent.middleware.defaults import default_middleware
from longhaul.agent.run_context import settle
from longhaul.agent.tools.builtin import builtin_tools
from longhaul.agent.turn import Turn
from longhaul.domain import events as ev
from longhaul.domain.config import PipelineConfig

from tests.unit.agent.support import (
    AgentRun,
    MemorySink,
    answer,
    call,
    calls,
    new_state,
    scripted,
)
from tests.unit.agent.support import make_engine as engine_over


def bare_turn(working_root: Path) -> Turn:
    state = new_state("hi")
    engine = engine_over(working_root)
    model, _ = scripted(answer("hi"))
    return Turn(
        state=state,
        sink=MemorySink(state),
        model=model,
        utility_model=model,
        config=engine.config,
        env=engine.env,
        tools=builtin_tools(),
        live=None,
    )


def test_a_turn_has_no_settings_before_they_are_resolved(tmp_path: Path) -> None:
    """Nothing can read a placeholder (whose working directory was the root of every key's
    folders) before the turn resolved its own."""
    turn = bare_turn(tmp_path)
    with pytest.raises(RuntimeError, match="before they were resolved"):
        _ = turn.working_dir


async def test_a_turns_settings_are_resolved_once(tmp_path: Path) -> None:
    turn = bare_turn(tmp_path)
    await settle(turn)
    assert turn.working_dir != tmp_path and turn.working_dir.is_relative_to(tmp_path)
    with pytest.raises(RuntimeError, match="resolved once"):
        await settle(turn)


class ChangeConfig(Middleware):
    """Changes the live fold's config once the turn has started."""

    async def before_agent(self, turn: Turn) -> None:
        turn.state.config.auto_execute_tools = False
        turn.state.config.approval = ["glob"]


async def test_the_engine_reads_the_settings_not_the_live_config(tmp_path: Path) -> None:
    run = AgentRun(
        tmp_path,
        "list files",
        middleware=[*default_middleware(PipelineConfig()), ChangeConfig()],
    )
    outcome = await run.turn(calls(call("glob", {"pattern": "*"})), answer("done"))
    assert outcome.end == "completed"  # the call ran: no client_tools or approval wait
    [result] = [m for m in run.sink.of_type(ev.MessageAppended) if m.role == "tool"]
    assert result.tool_call_id
