"""A requested reflection is a small agent on a side branch: read-only tools, at most five
model turns, a JSON answer validated with one repair round, experiences recorded with
``helpful: 1``; the main path and what the agent continues from are untouched."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

from longhaul.domain import events as ev
from longhaul.llm.types import ModelError

from tests.unit.agent.support import AgentRun, answer, call, calls, trace_dir
from tests.unit.agent.test_experience_recall import DictBook

LESSON = {
    "category": "tool_usage",
    "tags": {"intent": ["Code Search"], "state": ["python_repo"]},
    "content": "When searching a Python repo, grep for 'def name(' first, because it found "
    "parse() at once here.",
}


def reflection_of(run: AgentRun) -> list[ev.MessageAppended]:
    return [m for m in run.state.all_messages() if m.branch_type == "reflection"]


async def test_reflection_uses_tools_repairs_once_and_records_experiences(
    tmp_path: Path,
) -> None:
    home = trace_dir(tmp_path)
    book = DictBook(None, [])
    run = AgentRun(tmp_path, experiences=book)
    state = run.state
    (home / "notes.txt").write_text("parse() lives in parser.py")
    await run.sink.emit([ev.ReflectRequested(focus="searching")])
    outcome = await run.turn(
        calls(call("read", {"path": "notes.txt"}), call("bash", {"command": "rm -rf ."})),
        answer("I learned a lot."),  # prose: invalid, sent back once
        answer("```json\n" + json.dumps({"experiences": [LESSON]}) + "\n```"),
        answer("final"),
    )
    requests = run.script.requests
    assert "focus: searching" in requests[0].messages[-1]["content"]
    offered = {spec.name for spec in requests[0].tools}
    assert "read" in offered and "bash" not in offered and "write" not in offered
    branch = reflection_of(run)
    roles = [m.role for m in branch]
    assert roles == [
        "user",
        "assistant",
        "tool",
        "tool",
        "assistant",
        "user",
        "assistant",
        "assistant",
    ]
    assert branch[0].parent_sequence == 1  # off the head
    assert all(m.parent_sequence == p.sequence for p, m in itertools.pairwise(branch))
    assert "parse() lives in parser.py" in str(branch[2].content)
    assert branch[3].error_code == "unknown_tool"  # bash is not offered while reflecting
    assert "not valid" in str(branch[5].content)
    assert requests[2].tools == [] and requests[2].response_schema is not None
    # The main path never saw any of it; the run went on from the head and finished.
    assert not {m.sequence for m in branch} & set(state.path)
    assert outcome.end == "completed" and state.summary == "final"
    assert "reflect" not in str(requests[3].messages)
    (recorded,) = book.data[None].values()
    assert recorded.metrics.helpful == 1 and recorded.trace_id == state.trace_id
    assert recorded.tags.intent == ["code_search"] and recorded.category == "tool_usage"
    assert branch[-1].content == f"Recorded experiences: {recorded.id}"


async def test_an_answer_still_invalid_after_the_repair_records_nothing(tmp_path: Path) -> None:
    book = DictBook(None, [])
    run = AgentRun(tmp_path, experiences=book)
    await run.sink.emit([ev.ReflectRequested()])
    bad = {"experiences": [{**LESSON, "category": "gossip"}]}
    await run.turn(answer(json.dumps(bad)), answer(json.dumps(bad)), answer("final"))
    branch = reflection_of(run)
    assert branch[-1].error_code == "invalid_output" and "category" in str(branch[-1].content)
    assert book.data[None] == {} and run.state.status == "completed"


async def test_five_turns_at_most_then_an_answer_without_tools(tmp_path: Path) -> None:
    run = AgentRun(tmp_path, experiences=DictBook(None, []))
    await run.sink.emit([ev.ReflectRequested()])
    glob = calls(call("glob", {"pattern": "*"}))
    await run.turn(glob, glob, glob, glob, answer('{"experiences": []}'), answer("final"))
    assert [bool(r.tools) for r in run.script.requests[:5]] == [True] * 4 + [False]
    assert reflection_of(run)[-1].content == "Recorded experiences: none"


async def test_a_failed_model_call_ends_the_branch(tmp_path: Path) -> None:
    run = AgentRun(tmp_path, experiences=DictBook(None, []))
    await run.sink.emit([ev.ReflectRequested()])
    await run.turn(ModelError("down"), answer("final"))
    assert reflection_of(run)[-1].error_code == "model_error"
    assert not run.state.reflect_requested and run.state.summary == "final"
