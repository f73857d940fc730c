"""``GET /api/usage`` (what keys spent, by key, model, preset and UTC day),
``GET /api/usage/waits`` (the runs waiting at a spend limit) and
``POST /api/traces/{id}/budget`` (the answer to one); the logic is
``longhaul.gateway.usecases.usage``.

The operator (a bearer of ``gateway.admin_keys``; the caller of a keyless gateway) reads
every key and answers any run; any other caller is a key, authenticated as on every route."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Query, Request
from fastapi.security import HTTPAuthorizationCredentials
from longhaul.gateway.auth import bearer_scheme, current_principal
from longhaul.gateway.errors import ERROR_RESPONSES
from longhaul.gateway.runtime import runtime_of
from longhaul.gateway.schemas.usage import (
    BudgetAnswer,
    BudgetAnswered,
    BudgetWaits,
    BudgetWaitView,
    UsageRowView,
    UsageView,
)
from longhaul.gateway.usecases import usage as usecase

router = APIRouter(tags=["usage"], responses=ERROR_RESPONSES)


async def caller(
    request: Request,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer_scheme)],
) -> usecase.Caller:
    runtime = runtime_of(request.app)
    if credentials is not None and runtime.admin_keys.identify(credentials.credentials):
        return usecase.Caller(owner="admin", admin=True)
    principal = await current_principal(request, credentials)
    return usecase.Caller(owner=principal.owner, admin=runtime.keys.open)


Caller = Annotated[usecase.Caller, Depends(caller)]


@router.get(
    "/api/usage",
    response_model=UsageView,
    summary="What was spent (tokens, dollars, calls) by key, model, preset and UTC day",
)
async def get_usage(
    request: Request,
    who: Caller,
    group_by: Annotated[
        str,
        Query(
            pattern=usecase.GROUP_BY_PATTERN,
            description="comma-separated: key, model, preset, day (empty: one total)",
        ),
    ] = "key,model,preset,day",
    since: Annotated[
        str | None,
        Query(
            pattern=usecase.DAY_PATTERN,
            description="first UTC day counted, YYYY-MM-DD (default: all)",
        ),
    ] = None,
) -> UsageView:
    groups = usecase.parse_groups(group_by)
    rows = await usecase.usage(runtime_of(request.app), who, groups, since)
    views = [UsageRowView.model_validate(row, from_attributes=True) for row in rows]
    total = UsageRowView(
        tokens=sum(r.tokens for r in rows),
        usd=sum(r.usd for r in rows),
        calls=sum(r.calls for r in rows),
    )
    return UsageView(group_by=list(groups), since=since, rows=views, total=total)


@router.get(
    "/api/usage/waits",
    response_model=BudgetWaits,
    summary="Runs waiting at a spend limit, oldest first: the operator's across every key",
)
async def list_budget_waits(request: Request, who: Caller) -> BudgetWaits:
    """A key sees its own (as in its inbox); answer each with ``POST /api/traces/{id}/budget``."""
    waits = usecase.budget_waits(runtime_of(request.app), who)
    items = [BudgetWaitView.model_validate(w, from_attributes=True) for w in waits]
    return BudgetWaits(items=items, count=len(items))


@router.post(
    "/api/traces/{trace_id}/budget",
    response_model=BudgetAnswered,
    summary="Answer a run waiting at a spend limit: raise its limit for this run, or stop it",
)
async def answer_budget(
    trace_id: str, body: BudgetAnswer, request: Request, who: Caller
) -> BudgetAnswered:
    """The operator answers any run; a key its own, only with ``spend_limits.keys_answer``
    (else 403). A run that is not waiting on a budget is a 409."""
    state = await usecase.answer_budget(
        runtime_of(request.app), who, trace_id, body.action, usd=body.usd, tokens=body.tokens
    )
    raised = state.usage.raised
    return BudgetAnswered(
        trace_id=trace_id,
        status=state.status or "running",
        raised_usd=raised.cost,
        raised_tokens=raised.tokens,
    )
