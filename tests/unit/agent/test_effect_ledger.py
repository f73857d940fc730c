"""The effect ledger: a call with effects is on the log (``effect_started``) before it acts;
cut off by a crash, an idempotent call is run again by the engine with its first key, an unsafe
one with a ``reconcile`` hook is reconciled, and one without waits for a person — the model
never sees "interrupted, call again" for an effect."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest
from longhaul.agent.contract import EffectNotRecorded
from longhaul.agent.tools import ToolContext, ToolRegistry, tool
from longhaul.agent.tools.result import ToolResult
from longhaul.domain import events as ev
from longhaul.domain.state import TraceState
from longhaul.domain.state.errors import InvalidTransition

from tests.unit.agent.support import AgentRun, MemorySink, answer, call, calls

ACTED: list[tuple[str, str]] = []
"""(tool, idempotency key) of every time a tool acted."""


@tool(effects="idempotent")
async def charge(ctx: ToolContext, amount: int) -> str:
    """Charge an amount (the payment service applies one charge per key).

    Args:
        amount: cents.
    """
    ACTED.append(("charge", ctx.idempotency_key))
    return f"charged {amount}"


@tool
async def deploy(ctx: ToolContext) -> str:
    """Deploy (unsafe: twice is two deploys)."""
    ACTED.append(("deploy", ctx.idempotency_key))
    return "deployed"


BOOKED: dict[str, str] = {}
"""What the booking service says it did, by idempotency key (``reconcile`` reads it)."""


async def booked(ctx: ToolContext) -> ToolResult | None:
    if "down" in BOOKED:
        raise ConnectionError("booking service down")
    done = BOOKED.get(ctx.idempotency_key)
    return None if done is None else ToolResult(output=done)


@tool(reconcile=booked)
async def book(ctx: ToolContext, room: str) -> str:
    """Book a room (unsafe, but the booking service can say what it did).

    Args:
        room: which room.
    """
    ACTED.append(("book", ctx.idempotency_key))
    BOOKED[ctx.idempotency_key] = f"booked {room}"
    return f"booked {room}"


class DiesWithTheResult(MemorySink):
    """The executor dies after the tool acted, before its result reached the log."""

    async def emit(self, events: Sequence[ev.TraceEvent]) -> None:
        if any(isinstance(e, ev.MessageAppended) and e.role == "tool" for e in events):
            raise ConnectionError("executor died")
        await super().emit(events)


def run_on(tmp_path: Path) -> AgentRun:
    ACTED.clear()
    BOOKED.clear()
    return AgentRun(tmp_path, sink=DiesWithTheResult, tools=ToolRegistry([charge, deploy, book]))


async def cut_off(run: AgentRun, tool_call: dict[str, object]) -> str:
    with pytest.raises(ConnectionError):
        await run.turn(calls(tool_call))
    [started] = run.sink.of_type(ev.EffectStarted)
    assert [c.id for c in run.state.unsettled_effects()] == [started.tool_call_id]
    return started.idempotency_key


def resolutions(state: TraceState, call_id: str) -> list[str]:
    effect = state.ledger.get(call_id)
    assert effect is not None
    return [r.resolution for r in effect.resumed]


def results(state: TraceState) -> list[tuple[str | None, object]]:
    return [
        (m.error_code, m.content)
        for m in (state.messages[s] for s in state.path)
        if m.role == "tool"
    ]


async def test_the_effect_is_on_the_log_before_the_call_acts(tmp_path: Path) -> None:
    run = AgentRun(tmp_path, tools=ToolRegistry([charge]))
    ACTED.clear()
    await run.turn(calls(call("charge", {"amount": 5}, id="c1")), answer("done"))
    kinds = [e.type for e in run.sink.events]
    assert kinds.index("effect_started") < next(
        i for i, e in enumerate(run.sink.events) if getattr(e, "role", "") == "tool"
    )
    [started] = run.sink.of_type(ev.EffectStarted)
    assert (started.tool, started.effects, started.idempotency_key) == (
        "charge",
        "idempotent",
        ACTED[0][1],
    )
    assert run.state.unsettled_effects() == []


async def test_an_idempotent_call_cut_off_is_run_again_with_its_key(tmp_path: Path) -> None:
    run = run_on(tmp_path)
    key = await cut_off(run, call("charge", {"amount": 5}, id="c1"))
    run.sink = MemorySink(run.state)
    outcome = await run.turn(answer("charged once"))
    assert outcome.end == "completed"
    assert ACTED == [("charge", key), ("charge", key)]  # the same key: the service applies once
    assert results(run.state) == [(None, "charged 5")]  # one result, no "interrupted"
    assert len(run.sink.of_type(ev.EffectStarted)) == 0  # its first record stands
    assert resolutions(run.state, "c1") == ["rerun"]


async def waits_for_a_person(run: AgentRun, key: str) -> None:
    run.sink = MemorySink(run.state)
    outcome = await run.turn()
    assert outcome.end == "waiting" and ACTED == [("deploy", key)]  # not run blindly
    assert run.state.wait_reason == "approval" and run.state.approval_pending == ["d1"]
    assert run.state.wait_detail.startswith("outcome unknown: deploy call d1")
    assert resolutions(run.state, "d1") == ["asked"]


@pytest.mark.parametrize(
    ("decision", "acted_again", "told"),
    [
        ((True, False), True, (None, "deployed")),
        ((False, False), False, ("effect_failed", "did not take effect: checked")),
        ((False, True), False, (None, "took effect: checked")),
    ],
    ids=["run-again", "failed", "took-effect"],
)
async def test_an_unsafe_call_cut_off_waits_for_a_person(
    tmp_path: Path, decision: tuple[bool, bool], acted_again: bool, told: tuple[str | None, str]
) -> None:
    """``decision``: (approved, took_effect)."""
    run = run_on(tmp_path)
    key = await cut_off(run, call("deploy", {}, id="d1"))
    await waits_for_a_person(run, key)

    approved, took_effect = decision
    decided = ev.ToolDecided(
        tool_call_id="d1", reason="checked", approved=approved, took_effect=took_effect
    )
    run.state.apply(decided)
    assert (await run.turn(answer("handled"))).end == "completed"
    assert ACTED == [("deploy", key)] * (2 if acted_again else 1)  # again: with the same key
    [(code, text)] = results(run.state)
    assert code == told[0] and told[1] in str(text)
    expected = ["asked", "run_again"] if acted_again else ["asked"]
    assert resolutions(run.state, "d1") == expected


async def test_a_call_run_again_and_cut_off_again_asks_again(tmp_path: Path) -> None:
    """A person's "run again" is used up by the run it allowed."""
    run = run_on(tmp_path)
    key = await cut_off(run, call("deploy", {}, id="d1"))
    await waits_for_a_person(run, key)
    run.state.apply(ev.ToolDecided(tool_call_id="d1", approved=True))
    run.sink = DiesWithTheResult(run.state)
    with pytest.raises(ConnectionError):
        await run.turn()
    run.sink = MemorySink(run.state)
    assert (await run.turn()).end == "waiting"
    assert ACTED == [("deploy", key)] * 2
    assert resolutions(run.state, "d1") == ["asked", "run_again", "asked"]


async def test_took_effect_answers_only_a_call_whose_outcome_is_unknown(tmp_path: Path) -> None:
    run = run_on(tmp_path)
    key = await cut_off(run, call("deploy", {}, id="d1"))
    await waits_for_a_person(run, key)
    with pytest.raises(InvalidTransition, match="not run again"):
        run.state.apply(ev.ToolDecided(tool_call_id="d1", approved=True, took_effect=True))
    with pytest.raises(InvalidTransition, match="does not wait for approval"):
        run.state.apply(ev.ToolDecided(tool_call_id="d2", approved=False, took_effect=True))


@pytest.mark.parametrize("done", [True, False])
async def test_reconcile_says_what_happened(tmp_path: Path, done: bool) -> None:
    run = run_on(tmp_path)
    key = await cut_off(run, call("book", {"room": "blue"}, id="b1"))
    if not done:
        BOOKED.clear()  # the service never applied it
    run.sink = MemorySink(run.state)
    assert (await run.turn(answer("booked"))).end == "completed"
    assert ACTED == [("book", key)] * (1 if done else 2)
    assert results(run.state) == [(None, "booked blue")]
    expected = "reconciled_done" if done else "reconciled_not_done"
    assert resolutions(run.state, "b1") == [expected]


async def test_a_reconcile_that_fails_leaves_it_to_a_person(tmp_path: Path) -> None:
    run = run_on(tmp_path)
    await cut_off(run, call("book", {"room": "blue"}, id="b1"))
    BOOKED["down"] = "yes"
    run.sink = MemorySink(run.state)
    outcome = await run.turn()
    assert outcome.end == "waiting" and run.state.approval_pending == ["b1"]
    assert "reconcile failed: booking service down" in run.state.wait_detail


def test_reconcile_is_for_tools_with_effects() -> None:
    with pytest.raises(TypeError, match="reconcile is for tools with effects"):

        @tool(read_only=True, reconcile=booked)
        def look() -> str:
            """Look."""
            return ""


async def test_a_call_cut_off_before_it_acted_is_interrupted_as_before(tmp_path: Path) -> None:
    class DiesAtTheLedger(MemorySink):
        async def emit(self, events: Sequence[ev.TraceEvent]) -> None:
            if any(isinstance(e, ev.EffectStarted) for e in events):
                raise ConnectionError("executor died")
            await super().emit(events)

    ACTED.clear()
    run = AgentRun(tmp_path, sink=DiesAtTheLedger, tools=ToolRegistry([deploy]))
    with pytest.raises(EffectNotRecorded):  # the turn ends; the call never acts
        await run.turn(calls(call("deploy", {}, id="d1")))
    assert ACTED == [] and run.state.unsettled_effects() == []
    run.sink = MemorySink(run.state)
    await run.turn(answer("ok"))
    assert [code for code, _ in results(run.state)] == ["interrupted"]


async def test_an_edited_call_cut_off_is_run_again_with_the_edited_arguments(
    tmp_path: Path,
) -> None:
    """Approved with edited arguments, the call acts and the executor dies before its result:
    the run again uses the edited arguments and the first key, never the model's."""
    ACTED.clear()
    run = AgentRun(
        tmp_path,
        trace_config=ev.TraceConfig(approval=["charge"]),
        sink=DiesWithTheResult,
        tools=ToolRegistry([charge]),
    )
    await run.turn(calls(call("charge", {"amount": 5000}, id="c1")))
    assert run.state.approval_pending == ["c1"] and ACTED == []
    await run.sink.emit(
        [ev.ToolDecided(tool_call_id="c1", approved=True, arguments={"amount": 50})]
    )
    with pytest.raises(ConnectionError):
        await run.turn()
    run.sink = MemorySink(run.state)
    assert (await run.turn(answer("charged"))).end == "completed"
    [(_, key), again] = ACTED
    assert again == ("charge", key)
    assert resolutions(run.state, "c1") == ["rerun"]
    [(code, content)] = results(run.state)
    assert code is None and "charged 50" in str(content) and "5000" not in str(content)
