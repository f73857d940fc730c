"""Experiences in the engine: a new trace is shown the top matches in its first user message
(never a continued one, nor one that turned recall off), ``get_experience`` is offered only to
a key that has experiences, and a finished trace's citations move the counters."""

from __future__ import annotations

import json
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from longhaul.agent.presets import PresetCatalog
from longhaul.domain import events as ev
from longhaul.domain.experiences import Experience, make
from longhaul.domain.state import TraceState
from longhaul.llm.types import ModelError

from tests.unit.agent.support import (
    MemorySink,
    MemoryWorkspace,
    answer,
    call,
    calls,
    make_engine,
    new_state,
    scripted,
)

T0 = datetime(2026, 1, 1, tzinfo=UTC)


class DictBook:
    """An in-memory ExperienceBook: owner → id → record."""

    def __init__(self, owner: str | None, items: Iterable[Experience]) -> None:
        self.data: dict[str | None, dict[str, Experience]] = {
            owner: {item.id: item for item in items}
        }

    async def list(self, owner: str | None) -> list[Experience]:
        return list(self.data.get(owner, {}).values())

    async def record(self, owner: str | None, experiences: Iterable[Experience]) -> None:
        self.data.setdefault(owner, {}).update({item.id: item for item in experiences})

    async def credit(self, owner: str | None, ids: Iterable[str], *, helpful: bool) -> None:
        for experience_id in ids:
            item = self.data.get(owner, {}).get(experience_id)
            if item is not None:
                item.metrics.helpful += helpful
                item.metrics.harmful += not helpful


def pool() -> list[Experience]:
    def one(id: str, intent: list[str], state: list[str], helpful: int = 0) -> Experience:
        return make(
            id=id,
            category="tool_usage",
            content=f"rule {id}",
            intent=intent,
            state=state,
            helpful=helpful,
            created_at=T0 + timedelta(minutes=len(id)),
        )

    return [
        one("ex_grep", ["code_search"], ["python_repo"]),
        one("ex_grepfast", ["code_search"], [], helpful=5),
        one("ex_py", ["testing"], ["python_repo"]),
        one("ex_cook", ["cooking"], ["kitchen"]),
    ]


TAGS = answer(json.dumps({"intent": ["Code Search"], "state": ["python_repo"]}))


def owned_state(*messages: str, config: ev.TraceConfig | None = None) -> TraceState:
    state = new_state(*messages, config=config)
    state.owner = "k_alice"
    return state


async def test_a_new_trace_starts_with_the_best_matches_and_credits_citations(
    tmp_path: Path,
) -> None:
    book = DictBook("k_alice", pool())
    engine = make_engine(tmp_path, experiences=book, workspace=MemoryWorkspace())
    utility, utility_script = scripted(TAGS)
    model, script = scripted(answer("Done, following ex_grep and ex_unknown."))
    state = owned_state("find where parse() is defined")
    await engine.run_turn(state, MemorySink(state), model=model, utility_model=utility)

    assert "find where parse() is defined" in str(utility_script.requests[0].messages)
    assert state.recalled is not None
    assert state.recalled.intent == ["code_search"] and state.recalled.state == ["python_repo"]
    assert state.recalled.ids == ["ex_grep", "ex_grepfast", "ex_py"]  # intent, then state
    first = script.requests[0].messages[0]
    assert first["role"] == "user"
    text = first["content"]
    assert text.startswith("find where parse() is defined\n\n## Reference experiences")
    assert text.index("[ex_grep]") < text.index("[ex_grepfast]") < text.index("[ex_py]")
    assert "ex_cook" not in text
    assert state.messages[1].content == text  # the trace shows what the model saw
    assert state.status == "completed"
    assert book.data["k_alice"]["ex_grep"].metrics.helpful == 1
    assert book.data["k_alice"]["ex_grepfast"].metrics.helpful == 5
    tools = [spec.name for spec in script.requests[0].tools]
    assert "get_experience" in tools

    # A reflection re-finishes the trace: no second credit, no second recall.
    sink = MemorySink(state)
    await sink.emit([ev.ReflectRequested()])
    reflecting, _ = scripted(answer('{"experiences": []}'))
    await engine.run_turn(state, sink, model=reflecting, utility_model=utility)
    assert state.status == "completed"
    assert book.data["k_alice"]["ex_grep"].metrics.helpful == 1


async def test_a_failed_trace_makes_its_citations_harmful(tmp_path: Path) -> None:
    book = DictBook("k_alice", pool())
    engine = make_engine(tmp_path, experiences=book)
    utility, _ = scripted(TAGS)
    cite = {"content": "per ex_py: list first", "tool_calls": [call("glob", {"pattern": "*"})]}
    model, _ = scripted(cite, ModelError("provider down"))
    state = owned_state("run the tests")
    await engine.run_turn(state, MemorySink(state), model=model, utility_model=utility)
    assert state.status == "failed"
    assert book.data["k_alice"]["ex_py"].metrics.harmful == 1
    assert book.data["k_alice"]["ex_py"].metrics.helpful == 0


@pytest.mark.parametrize(
    "setup",
    ["trace_off", "preset_off", "continued", "sub_trace", "no_store"],
)
async def test_no_recall_where_it_does_not_apply(tmp_path: Path, setup: str) -> None:
    book = DictBook("k_alice", pool())
    presets = PresetCatalog({"plain": {"experiences": False}})
    config = ev.TraceConfig(
        experiences=False if setup == "trace_off" else None,
        preset="plain" if setup == "preset_off" else "default",
    )
    state = owned_state("find where parse() is defined", config=config)
    if setup == "continued":
        state.runs = 2
    if setup == "sub_trace":
        state.parent_trace_id = "t_parent"
    engine = make_engine(
        tmp_path, experiences=None if setup == "no_store" else book, presets=presets
    )
    utility, utility_script = scripted(TAGS)
    model, script = scripted(answer("ok"))
    await engine.run_turn(state, MemorySink(state), model=model, utility_model=utility)
    assert state.recalled is None and utility_script.requests == []
    assert script.requests[0].messages[0]["content"] == "find where parse() is defined"


async def test_a_key_without_experiences_gets_no_tool_and_no_model_call(tmp_path: Path) -> None:
    book = DictBook("k_bob", pool())  # Alice has none
    engine = make_engine(tmp_path, experiences=book)
    utility, utility_script = scripted(TAGS)
    model, script = scripted(answer("ok"))
    state = owned_state("find where parse() is defined")
    await engine.run_turn(state, MemorySink(state), model=model, utility_model=utility)
    assert state.recalled is None and utility_script.requests == []
    assert "get_experience" not in [spec.name for spec in script.requests[0].tools]


async def test_get_experience_answers_matches_of_the_owner_only(tmp_path: Path) -> None:
    book = DictBook("k_alice", pool())
    book.data["k_bob"] = {
        "ex_bob": make(id="ex_bob", category="tool_usage", content="bob's", intent=["code_search"])
    }
    engine = make_engine(tmp_path, experiences=book)
    utility, _ = scripted(TAGS)
    model, _ = scripted(calls(call("get_experience", {"intent": ["code search"]})), answer("done"))
    state = owned_state("find where parse() is defined")
    await engine.run_turn(state, MemorySink(state), model=model, utility_model=utility)
    result = next(m for m in state.main_path() if m.role == "tool")
    assert isinstance(result.content, str)
    assert result.content.index("[ex_grepfast]") < result.content.index("[ex_grep]")
    assert "ex_bob" not in result.content and "rule ex_grep" in result.content
