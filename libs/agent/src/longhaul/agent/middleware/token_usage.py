"""TokenUsage (before_model + after_model): usage and cost onto each assistant message, and
the trace's budgets.

``TraceConfig.max_tokens`` bounds prompt + completion tokens summed over the trace,
``max_cost`` its dollars. A step that would start over budget does not call the model; a
response that crosses a budget is recorded (it was paid for) and its tool calls are not run —
the trace stops with ``token_budget`` / ``cost_budget``. A final answer that crosses a budget
still completes: the work is done.
"""

from __future__ import annotations

from longhaul.agent.accounting import charge
from longhaul.agent.middleware.base import Middleware
from longhaul.agent.turn import Step, Turn
from longhaul.domain.events import TraceConfig, UsageRecord
from longhaul.llm.types import ModelRequest


def over_budget(config: TraceConfig, tokens: int, cost: float) -> str | None:
    if config.max_tokens is not None and tokens >= config.max_tokens:
        return "token_budget"
    if config.max_cost is not None and cost >= config.max_cost:
        return "cost_budget"
    return None


def _tokens(usage: UsageRecord | None) -> int:
    return usage.prompt_tokens + usage.completion_tokens if usage else 0


class TokenUsage(Middleware):
    async def before_model(self, turn: Turn, request: ModelRequest) -> None:
        totals = turn.state.totals
        reason = over_budget(
            turn.state.config, totals.prompt_tokens + totals.completion_tokens, totals.cost
        )
        if reason:
            turn.stop(reason)

    async def after_model(self, turn: Turn, step: Step) -> None:
        step.usage, step.cost = charge(
            turn.model.name, step.request, step.response, turn.env.models
        )
        if not step.calls:
            return
        totals = turn.state.totals
        reason = over_budget(
            turn.state.config,
            totals.prompt_tokens + totals.completion_tokens + _tokens(step.usage),
            totals.cost + step.cost,
        )
        if reason:
            turn.stop(reason)
