"""What a trace used (``longhaul.domain.state.usage``): totals over its life, the run's usage
the budgets count, children's usage once reported, and a new run's fresh count."""

from __future__ import annotations

from longhaul.domain import events as ev
from longhaul.domain.state.usage import Spending


def step(role: str = "assistant", **more: object) -> ev.MessageAppended:
    return ev.MessageAppended(sequence=2, parent_sequence=1, role=role, **more)  # type: ignore[arg-type]


def test_a_message_charges_the_totals_and_the_run() -> None:
    spent = Spending()
    used = ev.Usage(prompt_tokens=100, completion_tokens=20, cache_read_tokens=7)
    spent.charge(step(usage=used, cost=0.5, duration_ms=30))
    spent.charge(step(usage=ev.Usage(prompt_tokens=1, completion_tokens=1, saved_tokens={"x": 4})))
    assert (spent.totals.prompt_tokens, spent.totals.completion_tokens) == (101, 21)
    assert spent.totals.cache_read_tokens == 7 and spent.totals.saved_tokens == {"x": 4}
    assert (spent.totals.cost, spent.totals.duration_ms) == (0.5, 30)
    assert (spent.run.tokens, spent.run.cost, spent.run.iterations) == (122, 0.5, 2)


def test_only_a_main_loop_step_is_an_iteration() -> None:
    spent = Spending()
    spent.charge(step(synthetic=True))
    spent.charge(step(branch_type="reflection"))
    spent.charge(step(role="tool", tool_call_id="c"))
    assert spent.run.iterations == 0


def test_a_child_counts_in_the_run_not_the_totals_and_a_new_run_starts_at_zero() -> None:
    spent = Spending()
    spent.charge_child(
        ev.SubtraceFinished(child_trace_id="t_c", status="completed", tokens=50, cost=0.25)
    )
    assert (spent.run.tokens, spent.run.cost) == (50, 0.25)
    assert spent.totals.prompt_tokens == 0 and spent.totals.cost == 0
    spent.charge(step(cost=1.0))
    spent.new_run()
    assert (spent.run.tokens, spent.run.cost, spent.run.iterations) == (0, 0.0, 0)
    assert spent.totals.cost == 1.0


def test_a_copy_does_not_move_with_the_fold() -> None:
    spent = Spending()
    copy = spent.copy()
    spent.charge(step(usage=ev.Usage(prompt_tokens=3, completion_tokens=0), cost=1.0))
    assert (copy.totals.prompt_tokens, copy.run.cost) == (0, 0.0)
