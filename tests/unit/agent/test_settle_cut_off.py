"""Calls cut off by a crash whose effects stay in the trace's sandbox are settled without a
person: a ``write``/``edit`` by comparing the file with what the call meant to write (done,
not done, changed by someone else: the model is told which), a ``bash`` by telling the model
it was cut off and its outcome is unknown. A tool with effects outside the sandbox and neither
idempotency nor a ``reconcile`` hook still waits for a person; ``tools.on_unknown`` lets the
operator choose otherwise."""

from __future__ import annotations

from pathlib import Path

import pytest
from longhaul.agent.engine.effects import Settlement, settlement
from longhaul.agent.tools import ToolContext, ToolRegistry, ToolSettings, tool
from longhaul.agent.tools.files import FileOutcome, edit, edit_outcome, write, write_outcome
from longhaul.agent.tools.result import CUT_OFF, ToolResult
from longhaul.agent.tools.shell import bash
from longhaul.agent.workdir import trace_working_dir
from longhaul.domain import events as ev
from longhaul.domain.config import OnUnknown
from longhaul.domain.state.effects import Effect

from tests.unit.agent.support import AgentRun, MemorySink, answer, call
from tests.unit.agent.test_effect_ledger import (
    ACTED,
    DiesWithTheResult,
    book,
    charge,
    cut_off,
    deploy,
    resolutions,
    results,
)


@pytest.mark.parametrize(
    ("current", "expected"),
    [(b"new", "done"), (None, "not_done"), (b"someone else's", "changed")],
)
def test_a_write_is_done_not_done_or_changed(current: bytes | None, expected: FileOutcome) -> None:
    assert write_outcome(current, "new") == expected


@pytest.mark.parametrize(
    ("current", "old", "new", "expected"),
    [
        (b"x = 2\n", "x = 1", "x = 2", "done"),
        (b"x = 1\n", "x = 1", "x = 2", "not_done"),
        (b"y = 3\n", "x = 1", "x = 2", "changed"),
        (None, "x = 1", "x = 2", "changed"),  # an edit needs the file: someone removed it
        (b"f(1)\n", "f(1)", "g(f(1))", "not_done"),  # the new text holds the old one
        (b"g(f(1))\n", "f(1)", "g(f(1))", "done"),
        (b"keep\n", "drop\n", "", "done"),  # a deletion: the old text is gone
        (b"keep\ndrop\n", "drop\n", "", "not_done"),
    ],
)
def test_an_edit_is_done_not_done_or_changed(
    current: bytes | None, old: str, new: str, expected: FileOutcome
) -> None:
    assert edit_outcome(current, old, new) == expected


def _effect(name: str, effects: str = "unsafe", decided: bool = False) -> Effect:
    started = ev.EffectStarted(
        tool_call_id="c1",
        tool=name,
        idempotency_key="t:c1",
        effects=effects,  # type: ignore[arg-type]
    )
    decision = ev.ToolDecided(tool_call_id="c1", approved=True) if decided else None
    return Effect(started=started, decision=decision)


@pytest.mark.parametrize(
    ("tool_name", "override", "expected"),
    [
        ("bash", None, "model"),
        ("edit", None, "model"),
        ("write", None, "model"),  # idempotent, but the model is told what the file shows
        ("charge", None, "rerun"),
        ("book", None, "reconcile"),
        ("deploy", None, "ask"),  # effects outside the sandbox, nothing to settle it with
        ("bash", "ask", "ask"),
        ("bash", "rerun", "rerun"),
        ("deploy", "model", "model"),
    ],
)
def test_the_settle_rules(tool_name: str, override: OnUnknown | None, expected: Settlement) -> None:
    tools = {t.name: t for t in (bash, edit, write, charge, book, deploy)}
    effects = "unsafe" if tools[tool_name].effect == "none" else tools[tool_name].effect
    assert settlement(_effect(tool_name, effects), tools[tool_name], override) == expected


def test_a_persons_decision_comes_first() -> None:
    assert settlement(_effect("bash", decided=True), bash, "ask") == "run_again"


def found(root: Path, name: str) -> Path:
    return next(root.rglob(name))


def text_of(root: Path, name: str) -> str | None:
    files = list(root.rglob(name))
    return files[0].read_text() if files else None


def make_file(directory: Path, name: str, text: str) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / name).write_text(text)


def run_with(tmp_path: Path, **settings: object) -> AgentRun:
    ACTED.clear()
    return AgentRun(
        tmp_path,
        sink=DiesWithTheResult,
        tools=ToolRegistry([bash, edit, write, deploy]),
        tool_settings=ToolSettings(**settings),  # type: ignore[arg-type]
    )


async def resume(run: AgentRun) -> tuple[str | None, str]:
    """The turn after the crash: the model answers once it has the call's result."""
    run.sink = MemorySink(run.state)
    assert (await run.turn(answer("carried on"))).end == "completed"
    [(code, text)] = results(run.state)
    return code, str(text)


@pytest.mark.parametrize(
    ("after_the_crash", "expected", "told"),
    [
        (None, None, "the file shows it was made"),
        ("remove", CUT_OFF, "the file shows it was not made"),
        ("rewrite", CUT_OFF, "changed by someone else"),
    ],
    ids=["done", "not-done", "changed"],
)
async def test_a_write_cut_off_is_told_to_the_model(
    tmp_path: Path, after_the_crash: str | None, expected: str | None, told: str
) -> None:
    run = run_with(tmp_path)
    await cut_off(run, call("write", {"path": "notes.md", "content": "mine"}, id="w1"))
    target = found(tmp_path, "notes.md")
    if after_the_crash == "remove":
        target.unlink()
    elif after_the_crash == "rewrite":
        target.write_text("theirs")
    code, text = await resume(run)
    assert code == expected and told in text and "write of notes.md" in text
    assert resolutions(run.state, "w1") == ["told_model"]
    # never run again: someone else's change stands, a missing file stays missing
    assert (
        text_of(tmp_path, "notes.md")
        == {
            None: "mine",
            "remove": None,
            "rewrite": "theirs",
        }[after_the_crash]
    )


async def test_an_edit_cut_off_is_told_to_the_model(tmp_path: Path) -> None:
    run = run_with(tmp_path)
    make_file(trace_working_dir(tmp_path, run.state, None), "a.py", "x = 1\n")
    await cut_off(run, call("edit", {"path": "a.py", "old": "x = 1", "new": "x = 2"}, id="e1"))
    run.sink = MemorySink(run.state)
    assert (await run.turn(answer("carried on"))).end == "completed"
    [(code, text)] = results(run.state)
    assert code is None and "edit of a.py" in str(text) and "was made" in str(text)
    assert text_of(tmp_path, "a.py") == "x = 2\n"  # edited once
    assert resolutions(run.state, "e1") == ["told_model"]


async def test_a_bash_call_cut_off_is_told_to_the_model_and_not_run_again(tmp_path: Path) -> None:
    run = run_with(tmp_path)
    await cut_off(run, call("bash", {"command": "echo once >> ran.log"}, id="b1"))
    code, text = await resume(run)
    assert code == CUT_OFF
    assert "cut off" in text and "outcome is unknown" in text and "none of its output" in text
    assert "Inspect" in text
    assert text_of(tmp_path, "ran.log") == "once\n"  # run once, not twice
    assert resolutions(run.state, "b1") == ["told_model"]


async def test_the_operator_may_ask_a_person_about_bash(tmp_path: Path) -> None:
    run = run_with(tmp_path, on_unknown={"bash": "ask"})
    await cut_off(run, call("bash", {"command": "echo once >> ran.log"}, id="b1"))
    run.sink = MemorySink(run.state)
    assert (await run.turn()).end == "waiting"
    assert run.state.approval_pending == ["b1"]
    assert run.state.wait_detail.startswith("outcome unknown: bash call b1")


async def test_a_tool_with_outside_effects_still_asks_and_the_operator_may_say_model(
    tmp_path: Path,
) -> None:
    run = run_with(tmp_path)
    await cut_off(run, call("deploy", {}, id="d1"))
    run.sink = MemorySink(run.state)
    assert (await run.turn()).end == "waiting" and run.state.approval_pending == ["d1"]

    run = run_with(tmp_path, on_unknown={"deploy": "model"})
    await cut_off(run, call("deploy", {}, id="d1"))
    code, text = await resume(run)
    assert code == CUT_OFF and "deploy call was cut off" in text
    assert len(ACTED) == 1  # not run again


def test_settle_is_for_tools_the_model_is_told_about() -> None:
    async def look(ctx: ToolContext, arguments: dict[str, object]) -> ToolResult:
        return ToolResult(output="")

    with pytest.raises(TypeError, match="settle is for on_unknown='model' tools"):

        @tool(settle=look)
        def touch() -> str:
            """Touch."""
            return ""
