"""``GET /api/usage`` and ``POST /api/traces/{id}/budget``."""

from __future__ import annotations

from typing import Literal

from longhaul.gateway.schemas.common import Body
from pydantic import BaseModel, Field


class UsageRowView(BaseModel):
    key: str | None = Field(default=None, description="key id (k_…); null when not grouped")
    model: str | None = None
    preset: str | None = None
    day: str | None = Field(default=None, description="UTC day, YYYY-MM-DD")
    tokens: int = Field(description="prompt + completion tokens")
    usd: float
    calls: int = Field(description="model calls")


class UsageView(BaseModel):
    group_by: list[str]
    since: str | None
    rows: list[UsageRowView]
    total: UsageRowView


class BudgetWaitView(BaseModel):
    trace_id: str
    key: str | None = Field(description="the run's key id (k_…)")
    name: str | None = None
    since: float = Field(description="when the wait began (Unix seconds)")
    detail: str = Field(description="the limit reached and what was spent")


class BudgetWaits(BaseModel):
    items: list[BudgetWaitView]
    count: int


class BudgetAnswer(Body):
    action: Literal["raise", "stop"]
    usd: float = Field(
        default=0.0, ge=0, allow_inf_nan=False, description="raise: dollars more for this run"
    )
    tokens: int = Field(default=0, ge=0, description="raise: tokens more for this run")


class BudgetAnswered(BaseModel):
    trace_id: str
    status: str
    raised_usd: float = Field(description="what answers gave this run in all")
    raised_tokens: int
