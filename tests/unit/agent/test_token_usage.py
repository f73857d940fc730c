"""TokenUsage: usage, cost and duration on the assistant message; token and cost budgets."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from longhaul.domain import events as ev
from longhaul.domain.config import ModelPrice, ModelsConfig
from longhaul.domain.state import TraceState
from longhaul.llm.types import ModelRequest

from tests.unit.agent.support import (
    FixedClock,
    MemorySink,
    answer,
    call,
    calls,
    make_engine,
    new_state,
    scripted,
)

USAGE = {"prompt_tokens": 1000, "completion_tokens": 200, "cache_read_tokens": 400}
PRICED = ModelsConfig(prices={"acme-1": ModelPrice(input=2.0, cached_input=1.0, output=10.0)})


def step(turn: dict) -> dict:
    return {**turn, "usage": USAGE}


async def test_usage_cost_duration_and_model_on_the_assistant_message(tmp_path: Path) -> None:
    clock = FixedClock()

    def slow_answer(request: ModelRequest) -> dict[str, Any]:
        clock.advance(1.5)
        return step(answer("ok"))

    model, _ = scripted(slow_answer, name="acme:acme-1")
    state = new_state()
    sink = MemorySink(state)
    engine = make_engine(tmp_path, models=PRICED, clock=clock)
    await engine.run_turn(state, sink, model=model)
    message = state.messages[state.head_sequence]
    assert message.usage == ev.Usage(
        prompt_tokens=1000, completion_tokens=200, cache_read_tokens=400
    )
    # 600 fresh at $2 + 400 cached at $1 + 200 out at $10, per million.
    assert abs(message.cost - (600 * 2 + 400 * 1 + 200 * 10) / 1e6) < 1e-12
    assert message.duration_ms == 1500 and message.model == "acme:acme-1"
    assert state.totals.prompt_tokens == 1000 and state.totals.cost == message.cost


async def test_unreported_usage_is_estimated_and_marked(tmp_path: Path) -> None:
    model, _ = scripted(answer("hello there"))
    state = new_state()
    await make_engine(tmp_path).run_turn(state, MemorySink(state), model=model)
    usage = state.messages[state.head_sequence].usage
    assert usage is not None and usage.estimated and usage.prompt_tokens > 0


async def test_token_budget_stops_before_running_more_tools(tmp_path: Path) -> None:
    model, script = scripted(
        step(calls(call("glob", {"pattern": "*"}))), step(calls(call("glob", {"pattern": "x"})))
    )
    state = new_state(config=ev.TraceConfig(max_tokens=2000))
    sink = MemorySink(state)
    outcome = await make_engine(tmp_path).run_turn(state, sink, model=model)
    assert outcome.end == "stopped" and outcome.stop_reason == "max_tokens"
    assert state.stop_reason == "max_tokens" and len(script.requests) == 2
    stopped = sink.of_type(ev.Stopped)[-1]
    assert stopped.used == ev.RunUsage(iterations=2, tokens=2400)
    tools = [m for m in sink.of_type(ev.MessageAppended) if m.role == "tool"]
    assert [m.error_code for m in tools] == [None, "not_run"]


async def test_cost_budget(tmp_path: Path) -> None:
    model, _ = scripted(step(calls(call("glob", {"pattern": "*"}))), name="acme:acme-1")
    state = new_state(config=ev.TraceConfig(max_cost=0.001))
    outcome = await make_engine(tmp_path, models=PRICED).run_turn(
        state, MemorySink(state), model=model
    )
    assert outcome.stop_reason == "max_cost" and state.status == "stopped"


async def test_a_final_answer_over_budget_still_completes(tmp_path: Path) -> None:
    model, _ = scripted(step(answer("the answer")))
    state = new_state(config=ev.TraceConfig(max_tokens=10))
    outcome = await make_engine(tmp_path).run_turn(state, MemorySink(state), model=model)
    assert outcome.end == "completed"


async def test_a_run_already_over_budget_does_not_call_the_model(tmp_path: Path) -> None:
    model, _ = scripted(step(calls(call("glob", {"pattern": "*"}))))
    state = new_state(config=ev.TraceConfig(max_tokens=1000))
    await make_engine(tmp_path).run_turn(state, MemorySink(state), model=model)
    assert state.status == "stopped" and state.stop_reason == "max_tokens"
    # A new turn of the same run (a takeover, a wake-up) gets no fresh budget.
    state.status = "running"
    idle, idle_script = scripted()
    outcome = await make_engine(tmp_path).run_turn(state, MemorySink(state), model=idle)
    assert outcome.stop_reason == "max_tokens" and idle_script.requests == []


async def test_a_new_run_starts_a_new_budget(tmp_path: Path) -> None:
    model, _ = scripted(step(calls(call("glob", {"pattern": "*"}))))
    state = new_state(config=ev.TraceConfig(max_tokens=1000))
    await make_engine(tmp_path).run_turn(state, MemorySink(state), model=model)
    assert state.stop_reason == "max_tokens" and state.run_usage.tokens == 1200
    await MemorySink(state).emit([ev.RunRequested(messages=[])])
    assert state.run_usage == ev.RunUsage()
    again, again_script = scripted(step(answer("done")))
    outcome = await make_engine(tmp_path).run_turn(state, MemorySink(state), model=again)
    assert outcome.end == "completed" and len(again_script.requests) == 1


async def test_with_on_limit_ask_a_run_at_its_cap_waits_and_a_raise_lets_it_go_on(
    tmp_path: Path,
) -> None:
    model, script = scripted(
        step(calls(call("glob", {"pattern": "*"}))),
        step(calls(call("glob", {"pattern": "x"}))),
        step(answer("done")),
    )
    state = new_state(config=ev.TraceConfig(max_tokens=2000, on_limit="ask"))
    sink = MemorySink(state)
    engine = make_engine(tmp_path)
    outcome = await engine.run_turn(state, sink, model=model)
    # the call that crossed the cap had its tools run; the next model call was not made
    assert outcome.end == "waiting" and len(script.requests) == 2
    [wait] = sink.of_type(ev.Waiting)
    assert (wait.reason, wait.detail) == (
        "budget",
        "the run's max_tokens is reached: 2400 spent of 2000",
    )
    tools = [m for m in sink.of_type(ev.MessageAppended) if m.role == "tool"]
    assert [m.error_code for m in tools] == [None, None]
    await sink.emit([ev.BudgetAnswered(action="raise", tokens=1000)])
    outcome = await engine.run_turn(state, sink, model=model)
    assert outcome.end == "completed" and len(script.requests) == 3


class KeyAtLimit:
    """The key's spend as the executor's ledger would report it: at its limit from the start."""

    def __init__(self) -> None:
        self.counted = 0

    async def reached(self, state: TraceState) -> str | None:
        self.counted += 1
        return "the key's day limit (UTC) is reached: $5.0000 spent of $5.0"

    async def count(self, state: TraceState) -> None:
        self.counted += 1


async def test_a_key_at_its_spend_limit_waits_before_calling_the_model(tmp_path: Path) -> None:
    model, script = scripted(step(answer("never")))
    state = new_state()
    sink = MemorySink(state)
    spend = KeyAtLimit()
    outcome = await make_engine(tmp_path, spend=spend).run_turn(state, sink, model=model)
    assert outcome.end == "waiting" and script.requests == []
    assert state.wait_reason == "budget" and "$5.0000 spent of $5.0" in state.wait_detail
    assert spend.counted == 2  # asked before the call, counted when the turn ended
