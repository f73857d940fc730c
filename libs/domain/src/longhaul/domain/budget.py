"""The over-budget rule, one for every budget: a trace's run (``TraceConfig.max_tokens`` /
``max_cost``, checked by the ``TokenUsage`` middleware and for a sub-trace's ancestors), a
task's step traces together (``TaskState.max_tokens`` / ``max_cost``, the planner) and a key's
spend per UTC day and month (``spend_limits``, ``longhaul.domain.spend``)."""

from __future__ import annotations

from typing import Literal, Protocol

Cap = Literal["max_tokens", "max_cost"]


class Caps(Protocol):
    """Whatever carries the two caps (``None``: no cap)."""

    @property
    def max_tokens(self) -> int | None: ...

    @property
    def max_cost(self) -> float | None: ...


def over_budget(
    caps: Caps, tokens: int, cost: float, *, extra_tokens: int = 0, extra_cost: float = 0.0
) -> Cap | None:
    """The cap ``tokens`` / ``cost`` reached, tokens first, or ``None``. Reaching a cap is
    being over it: a run at its limit may not start another model call. ``extra_*``: what
    answers to a ``budget`` wait added for this run."""
    if caps.max_tokens is not None and tokens >= caps.max_tokens + extra_tokens:
        return "max_tokens"
    if caps.max_cost is not None and cost >= caps.max_cost + extra_cost:
        return "max_cost"
    return None
