"""A key's spend per UTC day (``longhaul.domain.spend``), the ``spend_limits`` config and the
``budget`` wait's fold."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest
from longhaul.core.config import load_config
from longhaul.domain import events as ev
from longhaul.domain.budget import over_budget
from longhaul.domain.config import ConfigError, KeyLimits, PeriodLimit, SpendLimitsConfig
from longhaul.domain.spend import DayEntry, Row, by_day, entry_key, limit_reached, split_key
from longhaul.domain.state import TraceState
from longhaul.domain.state.errors import InvalidTransition

NOON = datetime(2026, 11, 28, 12, tzinfo=UTC).timestamp()


def charged(sequence: int, tokens: int, cost: float, ts: float = NOON) -> ev.MessageAppended:
    return ev.MessageAppended(
        sequence=sequence,
        parent_sequence=sequence - 1 if sequence > 1 else None,
        role="assistant",
        content="x",
        usage=ev.Usage(prompt_tokens=tokens, completion_tokens=0),
        cost=cost,
        model="openai:gpt-4o",
        ts=ts,
    )


def test_counting_a_trace_again_adds_only_what_the_entry_has_not_seen() -> None:
    """An executor that dies after counting, or counts again on another executor, does not
    count a call twice: the trace's mark moves with the rows."""
    entry = DayEntry()
    first = [charged(1, 100, 0.5), charged(3, 50, 0.25)]
    assert entry.count("t_a", "default", first) == first
    assert entry.count("t_a", "default", first) == []  # the same messages again: nothing
    assert [m.sequence for m in entry.count("t_a", "default", [*first, charged(5, 10, 0.1)])] == [5]
    assert entry.count("t_b", "coder", [charged(1, 1, 0.0)])  # another trace, its own mark
    total = entry.total()
    assert (total.tokens, round(total.usd, 6), total.calls) == (161, 0.85, 4)
    assert set(entry.rows) == {"openai:gpt-4o\tdefault", "openai:gpt-4o\tcoder"}


def test_a_call_is_counted_on_its_own_utc_day() -> None:
    state = TraceState()
    state.apply(ev.TraceCreated(messages=[], owner="k_a"))
    late = datetime(2026, 11, 27, 23, 59, tzinfo=UTC).timestamp()
    old = datetime(2026, 11, 20, tzinfo=UTC).timestamp()
    for message in (charged(1, 1, 0, old), charged(2, 1, 0, late), charged(3, 1, 0)):
        state.apply(message)
    days = by_day(state, NOON)
    assert {k: [m.sequence for m in v] for k, v in days.items()} == {
        "k_a.2026-11.27": [2],
        "k_a.2026-11.28": [3],
    }
    assert entry_key("k_a", datetime(2026, 1, 2, tzinfo=UTC)) == "k_a.2026-01.02"
    assert split_key("k_a.2026-01.02") == ("k_a", "2026-01-02")


def test_a_limit_reached_names_the_period_what_was_spent_and_the_limit() -> None:
    limits = KeyLimits(day=PeriodLimit(usd=5), month=PeriodLimit(tokens=1000))
    assert limit_reached(limits, Row(usd=4.99), Row(tokens=999), 0, 0.0) is None
    day = limit_reached(limits, Row(usd=5.0), Row(tokens=10), 0, 0.0)
    assert day == "the key's day limit (UTC) is reached: $5.0000 spent of $5.0"
    month = limit_reached(limits, Row(usd=1.0), Row(tokens=1000), 0, 0.0)
    assert month is not None and "month limit" in month and "1000 tokens spent of 1000" in month
    # a raise for the run lifts every limit it counts by as much
    assert limit_reached(limits, Row(usd=5.0), Row(tokens=1000), 500, 1.0) is None


def test_a_raise_lifts_a_runs_own_cap_by_the_same_rule() -> None:
    caps = ev.TraceConfig(max_tokens=100)
    assert over_budget(caps, 150, 0.0) == "max_tokens"
    assert over_budget(caps, 150, 0.0, extra_tokens=100) is None


def test_a_key_has_its_own_periods_and_the_defaults_for_the_others() -> None:
    config = SpendLimitsConfig.model_validate(
        {
            "default": {"day": {"usd": 5, "tokens": 2_000_000}, "month": {"usd": 100}},
            "keys": {"k_0123456789abcdef": {"day": {"tokens": 50000}}},
        }
    )
    own = config.of("k_0123456789abcdef")
    assert own.day == PeriodLimit(tokens=50000)
    assert own.month == PeriodLimit(usd=100)
    assert config.of("k_other").day == PeriodLimit(usd=5, tokens=2_000_000)


@pytest.mark.parametrize(
    ("yaml_text", "field"),
    [
        ("spend_limits:\n  default:\n    day:\n      usd: -1\n", "spend_limits.default.day.usd"),
        (
            "spend_limits:\n  keys:\n    k_a:\n      month:\n        tokens: lots\n",
            "spend_limits.keys.k_a.month.tokens",
        ),
        ("spend_limits:\n  default:\n    week:\n      usd: 1\n", "spend_limits.default.week"),
    ],
)
def test_a_bad_limit_is_refused_at_start_naming_the_field(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, yaml_text: str, field: str
) -> None:
    path = tmp_path / "longhaul.yaml"
    path.write_text(yaml_text)
    monkeypatch.setenv("LONGHAUL_CONFIG", str(path))
    with pytest.raises(ConfigError) as refused:
        load_config()
    assert field in str(refused.value)


def waiting_on_budget() -> TraceState:
    state = TraceState()
    state.apply(ev.TraceCreated(messages=[], owner="k_a"))
    state.apply(ev.Waiting(reason="budget", detail="the key's day limit (UTC) is reached"))
    return state


def test_a_raise_wakes_the_run_with_more_to_spend_and_a_stop_asks_it_to_stop() -> None:
    state = waiting_on_budget()
    state.check(raised := ev.BudgetAnswered(action="raise", usd=2.0, tokens=100))
    state.apply(raised)
    assert state.status == "running"
    assert (state.usage.raised.tokens, state.usage.raised.cost) == (100, 2.0)
    with pytest.raises(InvalidTransition):  # no longer waiting on a budget
        state.check(ev.BudgetAnswered(action="raise", usd=1.0))

    stopping = waiting_on_budget()
    stopping.apply(ev.BudgetAnswered(action="stop"))
    assert stopping.stop_requested and stopping.status == "waiting"


def test_a_question_is_not_answered_with_a_budget() -> None:
    state = TraceState()
    state.apply(ev.TraceCreated(messages=[], owner="k_a"))
    state.apply(ev.Waiting(reason="human", detail="which colour?"))
    with pytest.raises(InvalidTransition):
        state.check(ev.BudgetAnswered(action="raise", usd=1.0))
