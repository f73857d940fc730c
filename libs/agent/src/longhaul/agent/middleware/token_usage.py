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

With ``on_limit: "ask"`` a run at its own cap does not stop: it waits (``budget``) for a
raise or a stop, and a response that crosses the cap still has its calls run (the next step
asks). The key's spend per UTC day and month (``AgentEnv.spend``) always asks. Each check is
before a model call, so a run spends past a limit by at most the one call that crossed it.
"""

from __future__ import annotations

from longhaul.agent.accounting import charge
from longhaul.agent.contract import TurnOutcome
from longhaul.agent.middleware.base import Middleware
from longhaul.agent.turn import Step, Turn
from longhaul.domain.budget import over_budget
from longhaul.domain.events import Usage
from longhaul.llm.types import ModelRequest


def _tokens(usage: Usage | None) -> int:
    return usage.prompt_tokens + usage.completion_tokens if usage else 0


def _own_cap(turn: Turn, tokens: int, cost: float) -> str | None:
    raised = turn.state.usage.raised
    return over_budget(
        turn.settings, tokens, cost, extra_tokens=raised.tokens, extra_cost=raised.cost
    )


class TokenUsage(Middleware):
    async def before_model(self, turn: Turn, request: ModelRequest) -> None:
        state = turn.state
        used = state.run_usage
        reason = _own_cap(turn, used.tokens, used.cost)
        if reason and turn.settings.on_limit == "ask":
            cap = turn.settings.max_tokens if reason == "max_tokens" else turn.settings.max_cost
            spent = used.tokens if reason == "max_tokens" else round(used.cost, 4)
            turn.ask_budget(f"the run's {reason} is reached: {spent} spent of {cap}")
            return
        check_ancestors = turn.env.ancestor_budget
        if reason is None and check_ancestors is not None and state.parent_trace_id:
            reason = await check_ancestors(state)
        if reason:
            turn.stop(reason)
            return
        if turn.env.spend is not None:
            detail = await turn.env.spend.reached(state)
            if detail:
                turn.ask_budget(detail)

    async def after_model(self, turn: Turn, step: Step) -> None:
        step.usage, step.cost = charge(
            turn.model.name, step.request, step.response, turn.env.models
        )
        saved = {"offload": turn.history.saved_tokens, **turn.saved_tokens}
        turn.saved_tokens = {}
        step.usage.saved_tokens = {kind: n for kind, n in saved.items() if n > 0}
        if not step.calls or turn.settings.on_limit == "ask":
            return
        used = turn.state.run_usage
        reason = _own_cap(turn, used.tokens + _tokens(step.usage), used.cost + step.cost)
        if reason:
            turn.stop(reason)

    async def after_agent(self, turn: Turn, outcome: TurnOutcome) -> None:
        if turn.env.spend is not None:  # the turn's last model call (the next check counts
            await turn.env.spend.count(turn.state)  # it too, if this one is lost to a crash)
