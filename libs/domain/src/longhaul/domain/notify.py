"""Notifications: what an operator configures (``notify:`` webhooks), what happened (a
:class:`Notice`) and what became of each delivery (a :class:`DeliveryRecord`).

A notice is derived from one event of the log, so its id — and each delivery's, one per
webhook — is the same however often the event is handled: a receiver dedupes on it. The
kinds are the events a person wants to hear about; a new source (a schedule that failed, once
schedules write an event for it) is one more kind and one more line in the gateway's
``notify.notices`` table.
"""

from __future__ import annotations

from typing import Annotated, Literal, get_args

import msgspec
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, HttpUrl, SecretStr

NoticeKind = Literal[
    "run.completed",
    "run.failed",
    "run.stopped",
    "run.waiting",
    "budget.nearly_spent",
    "schedule.failed",
]
KINDS: tuple[NoticeKind, ...] = get_args(NoticeKind)
WaitKind = Literal["question", "approval", "plan_review", "budget"]
DeliveryStatus = Literal["pending", "delivered", "failed"]
NoticeAggregate = Literal["trace", "task", "schedule"]


class WebhookConfig(BaseModel):
    """One operator-configured receiver. URLs come from the configuration only, never from a
    client, so no tenant can point the gateway at an address of its choosing."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(
        pattern=r"^[A-Za-z0-9_-]{1,64}$", description="stable: part of every delivery id"
    )
    url: HttpUrl
    events: list[NoticeKind] = Field(default_factory=lambda: list(KINDS))
    format: Literal["longhaul", "slack"] = "longhaul"
    secret: SecretStr | None = Field(
        default=None,
        description="signs each body: X-Longhaul-Signature: sha256=HMAC(secret, '<ts>.<body>')",
    )
    keys: list[Annotated[str, Field(pattern=r"^k_[0-9a-f]{16}$")]] = Field(
        default_factory=list,
        description="only runs of these key ids (a key's owner in GET /api/info); empty: all",
    )
    budget_ratio: float = Field(
        default=0.8, gt=0, le=1, description="budget.nearly_spent once a run used this share"
    )
    timeout_s: float = Field(default=10.0, gt=0, le=120)
    max_attempts: int = Field(default=8, ge=1, le=50)
    retry_base_s: float = Field(default=1.0, gt=0, description="first retry after ~this long")
    retry_max_s: float = Field(default=300.0, gt=0)

    def wants(self, notice: Notice) -> bool:
        return notice.kind in self.events and (not self.keys or notice.owner in self.keys)


def _unique_names(hooks: list[WebhookConfig]) -> list[WebhookConfig]:
    names = [hook.name for hook in hooks]
    doubled = sorted({name for name in names if names.count(name) > 1})
    if doubled:
        raise ValueError(f"webhook names must be unique: {', '.join(doubled)}")
    return hooks


Webhooks = Annotated[list[WebhookConfig], AfterValidator(_unique_names)]


class WaitInfo(msgspec.Struct, kw_only=True, omit_defaults=True):
    kind: WaitKind
    detail: str = ""
    tool_calls: list[str] = msgspec.field(default_factory=list)
    """An approval: the names of the tools waiting for a decision."""


class BudgetInfo(msgspec.Struct, kw_only=True):
    limit: Literal["max_tokens", "max_cost"]
    used: float
    max: float
    ratio: float
    """``used / max`` when the notice was made."""


class Notice(msgspec.Struct, kw_only=True, omit_defaults=True):
    """Something a person may want to hear about, as longhaul's own webhook body carries it
    (plus ``delivery_id``). ``id`` is stable: the event's id, or for a budget the run's."""

    id: str
    kind: NoticeKind
    at: float
    aggregate: NoticeAggregate
    trace_id: str | None = None
    task_id: str | None = None
    schedule_id: str | None = None
    """The schedule that failed, or that started the run (a run's notices name it too)."""
    tick: str | None = None
    """``schedule.failed``: the tick (RFC 3339) that started nothing."""
    owner: str | None = None
    name: str | None = None
    status: str | None = None
    summary: str | None = None
    error: str | None = None
    stop_reason: str | None = None
    wait: WaitInfo | None = None
    budget: BudgetInfo | None = None
    event_type: str | None = None

    @property
    def aggregate_id(self) -> str:
        ids = {"trace": self.trace_id, "task": self.task_id, "schedule": self.schedule_id}
        return ids[self.aggregate] or ""


def delivery_id(notice: Notice, hook: str) -> str:
    """``<trace, task or schedule id>.<notice id>.<webhook>``: stable across redeliveries and
    restarts, unique across webhooks, and usable as a KV key."""
    return f"{notice.aggregate_id}.{notice.id}.{hook}"


class DeliveryRecord(msgspec.Struct, kw_only=True, omit_defaults=True):
    """What became of one delivery (``lh_notifications``, key = its delivery id)."""

    delivery_id: str
    webhook: str
    kind: NoticeKind
    aggregate: NoticeAggregate
    aggregate_id: str
    source_seq: int = 0
    """The stream sequence of the event whose handling drives this delivery (a budget notice
    may be made again by later events: they find the record and leave it to that one)."""
    body: str = ""
    """What every attempt sends, byte for byte."""
    status: DeliveryStatus = "pending"
    attempts: int = 0
    last_status_code: int | None = None
    last_error: str | None = None
    created_at: float = 0.0
    last_attempt_at: float | None = None
    next_attempt_at: float | None = None
    delivered_at: float | None = None
