"""The one over-budget rule (``longhaul.domain.budget``) every budget uses."""

from __future__ import annotations

from typing import get_args

from longhaul.agent.stop_reasons import MAX_COST, MAX_TOKENS
from longhaul.domain.budget import Cap, over_budget
from longhaul.domain.events import TraceConfig
from longhaul.domain.state import TaskState


def test_reaching_a_cap_is_over_it_and_tokens_are_named_first() -> None:
    caps = TraceConfig(max_tokens=100, max_cost=1.0)
    assert over_budget(caps, 99, 0.99) is None
    assert over_budget(caps, 100, 0.0) == "max_tokens"
    assert over_budget(caps, 0, 1.0) == "max_cost"
    assert over_budget(caps, 100, 1.0) == "max_tokens"


def test_no_cap_is_never_over() -> None:
    assert over_budget(TraceConfig(), 10**9, 10.0**9) is None
    assert over_budget(TraceConfig(max_cost=0.5), 10**9, 0.1) is None


def test_a_task_is_measured_by_the_same_rule() -> None:
    task = TaskState(max_tokens=None, max_cost=2.0)
    assert over_budget(task, 10**9, 1.99) is None
    assert over_budget(task, 0, 2.0) == "max_cost"


def test_the_caps_are_the_run_stop_reasons() -> None:
    """A run stopped by the rule names the cap as its ``stopped`` reason."""
    assert get_args(Cap) == (MAX_TOKENS, MAX_COST)
