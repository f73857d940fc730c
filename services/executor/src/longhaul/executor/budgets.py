"""A root's token/cost budget seen from a sub-trace: before each model call of a child, the
usage of every ancestor with a limit is summed from the log — its own run usage (which
includes what finished children reported) plus that of every descendant still running — so
children running side by side cannot together escape it."""

from __future__ import annotations

from longhaul.core.repository import Repository
from longhaul.domain.budget import over_budget
from longhaul.domain.state import TraceState

MAX_HOPS = 16


async def tree_usage(
    traces: Repository[TraceState], state: TraceState, hops: int = 0
) -> tuple[int, float]:
    """Tokens and cost of ``state``'s run and of its running descendants' runs."""
    tokens, cost = state.run_usage.tokens, state.run_usage.cost
    if hops >= MAX_HOPS:
        return tokens, cost
    for info in state.running_subtraces():
        child = await traces.load(info.child_trace_id)
        if not child.exists or (child.is_final and info.continue_from is not None):
            continue  # not started yet (a continuation's old run was reported already)
        more_tokens, more_cost = await tree_usage(traces, child, hops + 1)
        tokens += more_tokens
        cost += more_cost
    return tokens, cost


async def ancestor_over_budget(traces: Repository[TraceState], state: TraceState) -> str | None:
    """``max_tokens`` / ``max_cost`` if an ancestor of ``state`` has used up its run budget."""
    parent_id, hops = state.parent_trace_id, 0
    while parent_id is not None and hops < MAX_HOPS:
        ancestor = await traces.load(parent_id)
        if not ancestor.exists:
            return None
        config = ancestor.config
        if config.max_tokens is not None or config.max_cost is not None:
            tokens, cost = await tree_usage(traces, ancestor)
            raised = ancestor.usage.raised  # what answers to its budget waits added
            reason = over_budget(
                config, tokens, cost, extra_tokens=raised.tokens, extra_cost=raised.cost
            )
            if reason is not None:
                return reason
        parent_id, hops = ancestor.parent_trace_id, hops + 1
    return None
