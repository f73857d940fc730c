"""History: incremental request messages and token counts; one-time outputs; requests as
read-only views that share History's list and never change afterwards."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
from longhaul.agent.batch import Batch
from longhaul.agent.history import History, MessageView
from longhaul.domain import events as ev
from longhaul.domain.config import OffloadConfig, PipelineConfig
from longhaul.llm.types import ModelRequest

from tests.unit.agent.support import AgentRun, Reply, answer, call, calls, trace_dir


async def test_one_time_output_is_sent_once_then_its_memory(tmp_path: Path) -> None:
    home = trace_dir(tmp_path)
    (home / "a.txt").write_text("secret contents\n")
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


async def test_with_offloading_off_one_time_outputs_stay_in_full(tmp_path: Path) -> None:
    home = trace_dir(tmp_path)
    (home / "a.txt").write_text("secret contents\n")
    config = PipelineConfig(offload=OffloadConfig(enable=False))
    run = AgentRun(tmp_path, config=config)
    await run.turn(
        calls(call("read", {"path": "a.txt"}, id="r1")),
        calls(call("glob", {"pattern": "*"}, id="g1")),
        answer("ok"),
    )
    later = next(m for m in run.script.requests[2].messages if m.get("tool_call_id") == "r1")
    assert "secret contents" in later["content"]


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
    before = history.messages()
    kept = copy.deepcopy(list(before))
    assert len(before) == 4
    await run.sink.emit([ev.RunRequested(after_sequence=1, messages=[])])
    assert history.messages() == History(run.state).messages()
    assert len(history.messages()) == 1
    assert before == kept  # the view handed out before the rewind is untouched


def seen_at_call(turn: Reply, seen: list[list[dict[str, Any]]]) -> Reply:
    """``turn``, after recording a deep copy of the request's messages as the model saw them."""

    def answer_it(request: ModelRequest) -> Any:
        seen.append(copy.deepcopy(list(request.messages)))
        return turn

    return answer_it


async def test_requests_share_one_list_and_never_change_afterwards(tmp_path: Path) -> None:
    """No per-step copy, yet what a model saw stays what it saw: later steps, one-time outputs
    turning into their memory, a context reminder and a loop warning never rewrite an earlier
    request."""
    home = trace_dir(tmp_path)
    (home / "a.txt").write_text("secret contents\n")
    (home / "b.txt").write_text("more secrets\n")
    seen: list[list[dict[str, Any]]] = []
    turns = [
        calls(call("read", {"path": "a.txt"}, id="r1")),  # one-time output
        calls(call("glob", {"pattern": "*"}, id="g1")),  # reminder after 2 steps
        calls(call("glob", {"pattern": "*"}, id="g2")),  # a repeat: a loop warning next
        calls(call("read", {"path": "b.txt"}, id="r2"), call("glob", {"pattern": "b*"})),
        answer("ok"),
    ]
    run = AgentRun(tmp_path, config=PipelineConfig(context_injection_every=2))
    await run.turn(*(seen_at_call(turn, seen) for turn in turns))
    requests = run.script.requests
    assert [list(request.messages) for request in requests] == seen
    assert "secret contents" in str(seen[1]) and "secret contents" not in str(seen[2])
    assert seen[2][-1]["content"].startswith("[Context after 2 steps]")
    assert seen[3][-1]["content"].startswith("You are repeating glob")
    # Plain steps and the reminder share History's list; only the warning needed a copy.
    views = [r.messages for r in requests if isinstance(r.messages, MessageView)]
    assert len(views) == 4 and isinstance(requests[3].messages, list)
    assert len({id(view._shared) for view in views}) == 1
    assert "more secrets" in str(seen[4])  # the pending one-time output rides in the tail
    # The warning never entered the history; each reminder entered it once, as emitted.
    contents = [str(m["content"]) for m in History(run.state).messages()]
    assert not any(text.startswith("You are repeating") for text in contents)
    assert sum(text.startswith("[Context after") for text in contents) == 2


async def test_a_model_cannot_write_into_the_history(tmp_path: Path) -> None:
    refused: list[Exception] = []

    def vandal(request: ModelRequest) -> Any:
        extra = {"role": "user", "content": "injected"}
        try:
            request.messages.append(extra)  # type: ignore[attr-defined]
        except AttributeError as exc:
            refused.append(exc)
        try:
            request.messages[0] = extra  # type: ignore[index]
        except TypeError as exc:
            refused.append(exc)
        request.messages = [*request.messages, extra]  # its own list now: may do as it likes
        return calls(call("glob", {"pattern": "*"}))

    run = AgentRun(tmp_path)
    await run.turn(vandal, answer("ok"))
    assert len(refused) == 2
    last = run.script.requests[-1].messages
    assert "injected" not in str(list(last)) and isinstance(last, MessageView)
    assert "injected" not in str(History(run.state).messages())
    assert all(message.content != "injected" for message in run.state.messages.values())


async def test_extended_reuses_the_last_view_only_while_the_history_just_grew(
    tmp_path: Path,
) -> None:
    run = AgentRun(tmp_path)
    history = History(run.state)

    async def add(content: str) -> None:
        batch = Batch(run.state)
        batch.message("user", content=content)
        await run.sink.emit(batch.events)

    view = history.messages()
    assert history.messages() is view  # nothing new: the same view again
    await add("more")
    grown = history.extended(view, 1)
    assert grown is history.messages() and [m["content"] for m in grown] == ["do the task", "more"]
    assert len(view) == 1  # the earlier view did not grow
    await add("again")
    rebuilt = history.extended([{"role": "user", "content": "filtered"}], 1)
    assert isinstance(rebuilt, list) and [m["content"] for m in rebuilt] == ["filtered", "again"]
    stale = history.extended(view, 1)  # not the last view handed out: copied, same meaning
    assert isinstance(stale, list) and [m["content"] for m in stale] == ["do the task", "again"]


async def test_extended_never_reuses_a_view_whose_one_time_output_was_since_replaced(
    tmp_path: Path,
) -> None:
    run = AgentRun(tmp_path)
    history = History(run.state)
    batch = Batch(run.state)
    batch.message(
        "assistant",
        content="",
        tool_calls=[ev.ToolCall.of(id="c1", name="read")],
    )
    batch.message(
        "tool",
        content="full text",
        tool_call_id="c1",
        include_output_only_once=True,
        long_term_memory="read it earlier",
    )
    await run.sink.emit(batch.events)
    view = history.messages()
    assert view[-1]["content"] == "full text"
    batch = Batch(run.state)
    batch.message("assistant", content="thinking")
    batch.message("user", content="next")
    await run.sink.emit(batch.events)
    extended = history.extended(view, 2)
    assert [m["content"] for m in extended][-3:] == ["full text", "thinking", "next"]
    assert history.messages()[-3]["content"] == "read it earlier"


def test_message_view_is_a_read_only_sequence() -> None:
    shared: list[dict[str, Any]] = [{"n": 0}, {"n": 1}, {"n": 2}]
    view = MessageView(shared, 2, ({"n": 9},))
    shared.append({"n": 3})  # past the frozen prefix: invisible
    assert len(view) == 3 and list(view) == [{"n": 0}, {"n": 1}, {"n": 9}]
    assert view[0] == {"n": 0} and view[-1] == {"n": 9} and view[-3] == {"n": 0}
    assert view[1:] == [{"n": 1}, {"n": 9}] and isinstance(view[1:], list)
    assert view == [{"n": 0}, {"n": 1}, {"n": 9}] == view
    assert view == ({"n": 0}, {"n": 1}, {"n": 9}) and view != [{"n": 0}]
    assert view.index({"n": 9}) == 2 and {"n": 1} in view
    with pytest.raises(IndexError):
        view[3]
    with pytest.raises(IndexError):
        view[-4]
    with pytest.raises(TypeError):
        hash(view)
    assert not hasattr(view, "append") and not hasattr(view, "__setitem__")
