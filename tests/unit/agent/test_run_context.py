"""What the model saw is part of the trace: the first turn records its context once, later
turns and runs show the recorded one even after the preset changed, and a run request that
changes the config records a new one."""

from __future__ import annotations

from pathlib import Path

import msgspec
from longhaul.agent.presets import PresetCatalog
from longhaul.agent.run_context import RunContext, context_key
from longhaul.domain import events as ev

from tests.unit.agent.support import (
    MemorySink,
    MemoryWorkspace,
    answer,
    make_engine,
    new_state,
    scripted,
)

STRICT = {"strict": {"system_prompt": "You are strict.", "allowed_tools": ["read", "glob"]}}
LOOSE = {"strict": {"system_prompt": "You are loose now.", "allowed_tools": ["bash"]}}


async def test_later_runs_show_the_recorded_context_not_todays_preset(tmp_path: Path) -> None:
    workspace = MemoryWorkspace()
    state = new_state("hello", config=ev.TraceConfig(preset="strict"))
    sink = MemorySink(state)
    first, script1 = scripted(answer("hi"))
    engine = make_engine(tmp_path, workspace=workspace, presets=PresetCatalog(STRICT))
    await engine.run_turn(state, sink, model=first)
    [recorded] = sink.of_type(ev.ContextRecorded)
    assert (recorded.preset, sorted(recorded.tools)) == ("strict", ["glob", "read"])
    stored = msgspec.json.decode(
        workspace.data[context_key(state.trace_id, recorded.hash)], type=RunContext
    )
    assert stored.system_prompt.startswith("You are strict.")
    assert script1.requests[0].system_stable == stored.system_prompt

    # The operator edits the preset; the trace continues as it began.
    await sink.emit([ev.RunRequested(messages=[ev.InputMessage(role="user", content="again")])])
    second, script2 = scripted(answer("still strict"))
    engine = make_engine(tmp_path, workspace=workspace, presets=PresetCatalog(LOOSE))
    await engine.run_turn(state, sink, model=second)
    request = script2.requests[0]
    assert request.system_stable == stored.system_prompt
    assert sorted(t.name for t in request.tools) == ["glob", "read"]
    assert len(sink.of_type(ev.ContextRecorded)) == 1  # recorded once


async def test_a_run_that_changes_the_config_records_a_new_context(tmp_path: Path) -> None:
    workspace = MemoryWorkspace()
    state = new_state("hello", config=ev.TraceConfig(preset="strict"))
    sink = MemorySink(state)
    engine = make_engine(tmp_path, workspace=workspace, presets=PresetCatalog(LOOSE))
    await engine.run_turn(state, sink, model=scripted(answer("hi"))[0])
    changed = ev.TraceConfig(preset="strict", model_params=ev.ModelParams(temperature=0.1))
    await sink.emit([ev.RunRequested(messages=[], config=changed)])
    assert state.context is None
    await engine.run_turn(state, sink, model=scripted(answer("ok"))[0])
    first, second = sink.of_type(ev.ContextRecorded)
    assert first.hash != second.hash and second.tools == ["bash"]


async def test_a_context_recorded_before_contexts_were_per_trace_is_still_shown(
    tmp_path: Path,
) -> None:
    """A trace recorded under the shared ``context/<sha256>`` of an earlier release keeps
    showing its model that context (and records nothing new)."""
    workspace = MemoryWorkspace()
    state = new_state("hello", config=ev.TraceConfig(preset="strict"))
    sink = MemorySink(state)
    engine = make_engine(tmp_path, workspace=workspace, presets=PresetCatalog(STRICT))
    await engine.run_turn(state, sink, model=scripted(answer("hi"))[0])
    [recorded] = sink.of_type(ev.ContextRecorded)
    own = context_key(state.trace_id, recorded.hash)
    workspace.data[f"context/{recorded.hash}"] = workspace.data.pop(own)
    await sink.emit([ev.RunRequested(messages=[ev.InputMessage(role="user", content="again")])])
    second, script = scripted(answer("still strict"))
    engine = make_engine(tmp_path, workspace=workspace, presets=PresetCatalog(LOOSE))
    await engine.run_turn(state, sink, model=second)
    assert script.requests[0].system_stable.startswith("You are strict.")
    assert len(sink.of_type(ev.ContextRecorded)) == 1
