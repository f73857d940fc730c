"""Builds the gateway's notifier from the configuration and the service's stores."""

from __future__ import annotations

from longhaul.core.service import ServiceContext
from longhaul.domain.state import TraceState
from longhaul.gateway import access
from longhaul.gateway.notify.notices import NoticeSource
from longhaul.gateway.notify.notifier import Notifier
from longhaul.gateway.runtime import Runtime

FOLDS_CACHED = 256
"""Trace folds the notifier keeps: a budget is checked at each model answer of a run."""


def build_notifier(runtime: Runtime, ctx: ServiceContext) -> Notifier:
    hooks = runtime.config.notify
    ratios = [hook.budget_ratio for hook in hooks if "budget.nearly_spent" in hook.events]

    async def owner_of(state: TraceState) -> str | None:
        return await access.resolve_owner(
            runtime, state.owner, state.parent_trace_id, state.task_id
        )

    source = NoticeSource(
        ctx.followed_traces(FOLDS_CACHED), ctx.tasks, owner_of, min(ratios) if ratios else None
    )
    return Notifier(hooks, source, ctx.notification_records, runtime.metrics)
