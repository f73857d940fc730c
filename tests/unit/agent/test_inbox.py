"""The inbox in the engine: the volatile "Messages" note while unread messages wait,
``check_messages`` reading them (an event: a rewind before it makes them unread again), the
tools offered only to a trace with ``messaging``, and ``wake`` breaking a wait on a person or
on sub-agents (the waiting call is answered so the model can read; a sub-agent's later end
arrives in the inbox)."""

from __future__ import annotations

from pathlib import Path

import pytest
from longhaul.domain import events as ev
from longhaul.domain.state import InvalidTransition

from tests.unit.agent.support import AgentRun, answer, assert_tool_pairs_complete, call, calls

MESSAGING = ev.TraceConfig(messaging=True)


def message(
    content: str, *, sender: str = "alice", wake: bool = False, n: int = 1
) -> ev.MessageReceived:
    return ev.MessageReceived(sender=sender, content=content, wake=wake, message_id=f"msg_{n}")


async def test_note_while_unread_and_check_messages_marks_them_read(tmp_path: Path) -> None:
    run = AgentRun(tmp_path, "work", trace_config=MESSAGING)
    await run.sink.emit([message("use port 8081", n=1), message("and hurry", sender="bob", n=2)])
    await run.turn(calls(call("check_messages", {})), answer("done"))
    first, second = run.script.requests
    assert "Messages: 2 unread (latest from bob); read them with check_messages." in (
        first.system_volatile
    )
    assert "Messages:" not in second.system_volatile
    assert {t.name for t in first.tools} >= {"check_messages", "send_message"}
    [result] = [m for m in run.sink.of_type(ev.MessageAppended) if m.role == "tool"]
    assert "From alice:\nuse port 8081" in str(result.content) and "From bob:" in str(
        result.content
    )
    [read] = run.sink.of_type(ev.MessagesRead)
    assert read.message_ids == ["msg_1", "msg_2"]
    assert run.state.unread_messages() == []
    assert_tool_pairs_complete(second.messages)


async def test_a_rewind_before_the_read_makes_the_messages_unread(tmp_path: Path) -> None:
    run = AgentRun(tmp_path, "work", trace_config=MESSAGING)
    await run.sink.emit([message("news")])
    await run.turn(calls(call("check_messages", {})), answer("done"))
    assert run.state.unread_messages() == []
    await run.sink.emit([ev.RunRequested(after_sequence=1)])
    assert [m.message_id for m in run.state.unread_messages()] == ["msg_1"]


async def test_without_messaging_no_inbox_tools_and_no_inbox(tmp_path: Path) -> None:
    run = AgentRun(tmp_path, "work")
    with pytest.raises(InvalidTransition) as refused:
        run.state.check(message("hello"))
    assert refused.value.code == "messaging_off"
    await run.turn(answer("done"))
    names = {t.name for t in run.script.requests[0].tools}
    assert not names & {"check_messages", "send_message"}


async def test_a_message_without_wake_leaves_a_human_wait_alone(tmp_path: Path) -> None:
    run = AgentRun(tmp_path, "work", trace_config=MESSAGING)
    await run.turn(calls(call("ask_human", {"question": "which port?"})))
    assert run.state.wait_reason == "human"
    await run.sink.emit([message("fyi")])
    assert run.state.status == "waiting" and run.state.wait_reason == "human"


async def test_wake_answers_the_waiting_ask_human_call(tmp_path: Path) -> None:
    run = AgentRun(tmp_path, "work", trace_config=MESSAGING)
    await run.turn(calls(call("ask_human", {"question": "which port?"})))
    await run.sink.emit([message("port 8081", wake=True)])
    assert run.state.status == "running"
    outcome = await run.turn(calls(call("check_messages", {})), answer("using 8081"))
    assert outcome.end == "completed"
    tools = [m for m in run.sink.of_type(ev.MessageAppended) if m.role == "tool"]
    assert tools[0].name == "ask_human" and str(tools[0].content).startswith("No reply yet.")
    assert "port 8081" in str(tools[1].content)
    assert_tool_pairs_complete(run.script.requests[-1].messages)


async def test_wake_on_sub_agents_answers_the_call_and_their_end_arrives_as_a_message(
    tmp_path: Path,
) -> None:
    run = AgentRun(tmp_path, "work", trace_config=MESSAGING)
    await run.turn(calls(call("agent", {"task": "dig"}, id="a1")))
    assert run.state.wait_reason == "subtraces"
    [child] = run.state.subtraces
    await run.sink.emit([message("stop digging soon", wake=True)])
    await run.turn(calls(call("check_messages", {})), answer("waiting on the child"))
    [agent_result] = [m for m in run.sink.of_type(ev.MessageAppended) if m.name == "agent"]
    assert f"Sub-agent(s) {child} still running" in str(agent_result.content)
    await run.sink.emit(
        [ev.SubtraceFinished(child_trace_id=child, status="completed", summary="found it")]
    )
    [note] = run.state.unread_messages()
    assert note.sender_trace_id == child and note.content == "finished (completed): found it"
