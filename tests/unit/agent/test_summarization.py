"""Summarization: when to compress, level 1 (completed goals folded into their summaries),
level 2 (persisted summary), an unavailable summariser, and a requested compaction."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest
from longhaul.agent import Engine, default_middleware
from longhaul.agent.middleware.summarization import should_compress
from longhaul.domain import events as ev
from longhaul.domain.config import CompressionConfig
from longhaul.domain.state import TraceState
from longhaul.llm.types import ModelError

from tests.unit.agent.support import (
    MemorySink,
    answer,
    call,
    calls,
    make_engine,
    new_state,
    scripted,
)
from tests.unit.agent.test_experience_recall import DictBook

CHARS_PER_TOKEN = 4


@pytest.mark.parametrize(
    ("tokens", "limit", "expected"),
    [
        (110_000, 128_000, True),
        (5_000, 128_000, False),  # under 8,000 (and far from the limit)
        (7_000, 8_000, True),  # a window no bigger than min_tokens: the ratio decides
        (100_000, 128_000, False),  # under 80 %
        (7_500, 9_000, False),  # over 80 % but under 8,000 in a window that has room
    ],
)
def test_should_compress(tokens: int, limit: int, expected: bool) -> None:
    assert should_compress(tokens, limit, CompressionConfig()) is expected


async def add_tool_round(sink: MemorySink, call_id: str, output: str, goal: str | None = None):
    state = sink.state
    record = ev.ToolCall.of(id=call_id, name="read")
    n = state.last_sequence
    await sink.emit(
        [
            ev.MessageAppended(
                sequence=n + 1, parent_sequence=state.head_sequence, role="assistant",
                tool_calls=[record], goal_id=goal,
            ),
            ev.MessageAppended(
                sequence=n + 2, parent_sequence=n + 1, role="tool", content=output,
                tool_call_id=call_id, goal_id=goal,
            ),
        ]
    )  # fmt: skip


async def big_state(tokens: int) -> tuple[TraceState, MemorySink]:
    state = new_state("the task")
    sink = MemorySink(state)
    await add_tool_round(sink, "r1", "x" * (tokens * CHARS_PER_TOKEN))
    await add_tool_round(sink, "r2", "the group in progress")
    return state, sink


def engine_with_limit(tmp_path: Path, limit: int) -> Engine:
    middleware = default_middleware(context_limit=lambda model: limit)
    return make_engine(tmp_path, middleware=middleware)


@pytest.mark.parametrize(
    ("tokens", "limit", "compresses"),
    [(110_000, 128_000, True), (5_000, 128_000, False), (7_000, 8_000, True)],
)
async def test_level_two_summary_replaces_the_history(
    tmp_path: Path, tokens: int, limit: int, compresses: bool
) -> None:
    state, sink = await big_state(tokens)
    utility, utility_script = scripted(answer("SUMMARY: read a big file"), name="scripted:util")
    model, script = scripted(answer("done"))
    engine = engine_with_limit(tmp_path, limit)
    outcome = await engine.run_turn(state, sink, model=model, utility_model=utility)
    assert outcome.end == "completed"
    compacted = sink.of_type(ev.Compacted)
    if not compresses:
        assert compacted == [] and utility_script.requests == []
        assert len(script.requests[0].messages) == 5
        return
    [event] = compacted
    summary = state.messages[event.summary_sequence]
    assert event.range == (2, 3) and event.level == 2
    assert summary.branch_type == "compression" and summary.parent_sequence == 1
    assert "SUMMARY: read a big file" in str(summary.content)
    # The tool group in progress (r2) is kept verbatim under the summary.
    s = event.summary_sequence
    assert state.path == [1, s, s + 1, s + 2, state.head_sequence]
    sent = script.requests[0].messages
    assert [m["role"] for m in sent] == ["user", "user", "assistant", "tool"]
    assert sent[0]["content"] == "the task" and "SUMMARY" in sent[1]["content"]
    assert sent[2]["tool_calls"][0]["id"] == "r2" and sent[3]["content"] == "the group in progress"
    # The summariser worked on a side branch off the last summarised message: it saw the
    # conversation up to there and the prompt with the goal tree, and the read-only tools.
    asked = utility_script.requests[0]
    assert len(asked.messages) == 4 and "The plan as it stands" in asked.messages[-1]["content"]
    assert {spec.name for spec in asked.tools} >= {"read", "glob"} and all(
        spec.name not in ("write", "bash") for spec in asked.tools
    )
    prompt, answer_ = (state.messages[seq] for seq in (s - 2, s - 1))
    assert prompt.parent_sequence == 3 and answer_.parent_sequence == prompt.sequence
    assert all(m.side_branch and m.branch_type == "compression" for m in (prompt, answer_))
    assert prompt.sequence not in state.path and answer_.usage is not None


@pytest.mark.parametrize("output_tokens", [120_000, 50])
async def test_level_one_folds_completed_goals_into_their_summaries_in_the_request_only(
    tmp_path: Path, output_tokens: int
) -> None:
    """At any size (not only over the threshold): a completed goal's messages become one note
    with its summary, where they were; the log and the main path keep every raw message."""
    state = new_state("the task")
    sink = MemorySink(state)
    explore = ev.Goal(id="g1", title="explore")
    await sink.emit([ev.GoalChanged(op="add", goal=explore)])
    await sink.emit([ev.GoalChanged(op="focus", goal=explore)])
    await add_tool_round(sink, "old", "y" * output_tokens * CHARS_PER_TOKEN, goal="g1")
    await add_tool_round(sink, "older", "z", goal="g1")
    done = ev.Goal(id="g1", title="explore", summary="entry point is main.py:42")
    await sink.emit([ev.GoalChanged(op="done", goal=done)])
    await add_tool_round(sink, "new", "recent result")
    utility, utility_script = scripted()
    model, script = scripted(answer("done"))
    engine = engine_with_limit(tmp_path, 128_000)
    await engine.run_turn(state, sink, model=model, utility_model=utility)
    sent = script.requests[0].messages
    assert [m["role"] for m in sent] == ["user", "assistant", "assistant", "tool"]
    assert sent[1]["content"] == "[Goal g1 done: explore]\nentry point is main.py:42"
    assert [m.get("tool_call_id") for m in sent] == [None, None, None, "new"]
    assert utility_script.requests == [] and not sink.of_type(ev.Compacted)
    assert len(state.path) == 8  # nothing was removed from the log or the main path


async def test_unavailable_summariser_is_skipped_with_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    state, sink = await big_state(110_000)
    utility, _ = scripted(ModelError("503 from the utility model"), name="scripted:util")
    model, script = scripted(answer("done anyway"))
    engine = engine_with_limit(tmp_path, 128_000)
    with caplog.at_level(logging.WARNING):
        outcome = await engine.run_turn(state, sink, model=model, utility_model=utility)
    assert outcome.end == "completed" and state.summary == "done anyway"
    assert not sink.of_type(ev.Compacted)
    assert len(script.requests[0].messages) == 5
    assert any("compaction skipped" in record.message for record in caplog.records)


async def test_requested_compaction_is_forced(tmp_path: Path) -> None:
    state, sink = await big_state(100)
    await sink.emit([ev.CompactRequested()])
    utility, _ = scripted(answer("short summary"), name="scripted:util")
    model, _ = scripted(answer("done"))
    await engine_with_limit(tmp_path, 128_000).run_turn(
        state, sink, model=model, utility_model=utility
    )
    assert len(sink.of_type(ev.Compacted)) == 1 and not state.compact_requested


async def test_no_compaction_when_the_opening_alone_fills_the_window(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    state = new_state("q" * 120_000 * CHARS_PER_TOKEN)
    sink = MemorySink(state)
    await add_tool_round(sink, "r1", "small")
    utility, utility_script = scripted(name="scripted:util")
    model, _ = scripted(calls(call("glob", {"pattern": "*"})), answer("done"))
    with caplog.at_level(logging.WARNING):
        outcome = await engine_with_limit(tmp_path, 128_000).run_turn(
            state, sink, model=model, utility_model=utility
        )
    assert outcome.end == "completed" and utility_script.requests == []
    warnings = [r for r in caplog.records if "opening messages alone" in r.message]
    assert len(warnings) == 1  # once per turn, not once per step


async def test_a_lone_summary_is_not_summarised_again(tmp_path: Path) -> None:
    state, sink = await big_state(100)
    engine = engine_with_limit(tmp_path, 128_000)
    await sink.emit([ev.CompactRequested()])
    utility, utility_script = scripted(answer("S1"), name="scripted:util")
    await engine.run_turn(state, sink, model=scripted(answer("a"))[0], utility_model=utility)
    await sink.emit([ev.RunRequested(after_sequence=state.path[1], messages=[])])
    await sink.emit([ev.CompactRequested()])
    await engine.run_turn(state, sink, model=scripted(answer("b"))[0], utility_model=utility)
    assert len(utility_script.requests) == 1 and len(sink.of_type(ev.Compacted)) == 1


async def test_level_two_first_reflects_into_experiences_when_the_owner_has_a_store(
    tmp_path: Path,
) -> None:
    """Before the raw messages leave the context, a reflection side branch turns what they
    taught into experiences; then the summary replaces them as usual."""
    state, sink = await big_state(110_000)
    book = DictBook(None, [])
    lesson = {"category": "tool_usage", "content": "When a file is huge, page through it."}
    model, script = scripted(
        answer(json.dumps({"experiences": [lesson]})),  # the reflection's answer
        answer("done"),
    )
    utility, utility_script = scripted(answer("SUMMARY"), name="scripted:util")
    engine = make_engine(
        tmp_path,
        middleware=default_middleware(context_limit=lambda model: 128_000),
        experiences=book,
    )
    outcome = await engine.run_turn(state, sink, model=model, utility_model=utility)
    assert outcome.end == "completed"
    reflection = [m for m in state.all_messages() if m.branch_type == "reflection"]
    [compacted] = sink.of_type(ev.Compacted)
    assert reflection and max(m.sequence for m in reflection) < compacted.summary_sequence
    assert "reflect" in str(script.requests[0].messages[-1]["content"]).lower()
    [recorded] = await book.list(None)
    assert recorded.content == lesson["content"]
    assert len(utility_script.requests) == 1  # then the summary, once
    assert "SUMMARY" in str(state.messages[compacted.summary_sequence].content)
