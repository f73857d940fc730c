"""TokenUsage (before_model + after_model): usage and cost onto each assistant message (with
the tokens each saving removed from the request: ``Usage.saved_tokens``), and the run's token
and cost budgets.

The trace's ``max_tokens`` (``turn.settings``, resolved once) bounds prompt + completion
tokens summed over the run, ``max_cost`` its dollars (``TraceState.run_usage``, folded from
the log: a wait, a crash or a takeover never hands out a fresh budget; children's usage
counts once they report it). A step that would start over budget does not call the model; a
response that crosses a budget is recorded (it was paid for) and its tool calls are not run —
the trace stops with ``max_tokens`` / ``max_cost`` and what the run used. A final answer that
crosses a budget still completes: the work is done. A sub-trace also checks its ancestors
before each model call (``AgentEnv.ancestor_budget``: their run usage plus every running
descendant's), so children running side by side cannot together escape a root's limit.
"""

from __future__ import annotations

from longhaul.agent.accounting import charge
from longhaul.agent.middleware.base import Middleware
from longhaul.agent.turn import Step, Turn
from longhaul.domain.budget import over_budget
from longhaul.domain.events import Usage
from longhaul.llm.types import ModelRequest


def _tokens(usage: Usage | None) -> int:
    return usage.prompt_tokens + usage.completion_tokens if usage else 0


class TokenUsage(Middleware):
    async def before_model(self, turn: Turn, request: ModelRequest) -> None:
        used = turn.state.run_usage
        reason: str | None = over_budget(turn.settings, used.tokens, used.cost)
        check_ancestors = turn.env.ancestor_budget
        if reason is None and check_ancestors is not None and turn.state.parent_trace_id:
            reason = await check_ancestors(turn.state)
        if reason:
            turn.stop(reason)

    async def after_model(self, turn: Turn, step: Step) -> None:
        step.usage, step.cost = charge(
            turn.model.name, step.request, step.response, turn.env.models
        )
        saved = {"offload": turn.history.saved_tokens, **turn.saved_tokens}
        turn.saved_tokens = {}
        step.usage.saved_tokens = {kind: n for kind, n in saved.items() if n > 0}
        if not step.calls:
            return
        used = turn.state.run_usage
        reason = over_budget(
            turn.settings, used.tokens + _tokens(step.usage), used.cost + step.cost
        )
        if reason:
            turn.stop(reason)
