"""History: incremental request messages and token counts; one-time outputs."""

from __future__ import annotations

from pathlib import Path

from longhaul.agent.history import History
from longhaul.core import events as ev

from tests.unit.agent.support import AgentRun, answer, call, calls


async def test_one_time_output_is_sent_once_then_its_memory(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("secret contents\n")
    run = AgentRun(tmp_path)
    await run.turn(
        calls(call("read", {"path": "a.txt"}, id="r1")),
        calls(call("glob", {"pattern": "*"}, id="g1")),
        answer("ok"),
    )
    requests = run.script.requests
    first = next(m for m in requests[1].messages if m.get("tool_call_id") == "r1")
    later = next(m for m in requests[2].messages if m.get("tool_call_id") == "r1")
    assert "secret contents" in first["content"]
    assert "secret contents" not in later["content"] and "read a.txt lines 1-1" in later["content"]
    # The log keeps the full output: only requests shrink.
    stored = next(m for m in run.state.messages.values() if m.tool_call_id == "r1")
    assert "secret contents" in str(stored.content) and stored.include_output_only_once


async def test_incremental_view_equals_a_fresh_one(tmp_path: Path) -> None:
    turns = [calls(call("glob", {"pattern": f"p{i}"})) for i in range(6)]
    run = AgentRun(tmp_path)
    history = History(run.state)
    history.sync()
    await run.turn(*turns, answer("ok"))
    fresh = History(run.state)
    assert history.messages() == fresh.messages()
    assert history.tokens() == fresh.tokens() > 0
    assert history.assistant_count == fresh.assistant_count == 7


async def test_a_rewind_replaces_the_path_and_the_view_follows(tmp_path: Path) -> None:
    run = AgentRun(tmp_path)
    await run.turn(calls(call("glob", {"pattern": "*"})), answer("ok"))
    history = History(run.state)
    assert len(history.messages()) == 4
    await run.sink.emit([ev.RunRequested(after_sequence=1, messages=[])])
    assert history.messages() == History(run.state).messages()
    assert len(history.messages()) == 1
