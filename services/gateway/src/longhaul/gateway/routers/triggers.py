"""``/api/triggers``: a signed webhook that starts a run from a template.

Who owns a trigger: the key that created it; it is filed under that key's owner in
``lh_schedules`` and listed, shown and deleted only by it (another key's id: 404). The
webhook carries no API key, so its URL names the trigger by id (``trg_`` + 128 random bits),
not by name: names are unique only within a key, so two keys may both have a ``deploy``
trigger without meeting, and no request can learn whether another key's name exists. The id
only finds the trigger; the signature (HMAC-SHA256 with the secret given once at creation)
is what lets a request start a run; a trigger whose key is no longer configured (revoked) is
unknown (404) whatever it is signed with. Before either, the caller's address is rate-limited
(``gateway.webhook_rate_limit_per_minute``): an unauthenticated flood is refused with 429
without costing a KV read per request.
"""

from __future__ import annotations

import secrets
import time
from typing import Annotated, Any

from fastapi import APIRouter, Header, Request
from longhaul.gateway.auth import (
    CurrentPrincipal,
    Principal,
    enforce_limit,
)
from longhaul.gateway.deps import CurrentRuntime
from longhaul.gateway.errors import ERROR_RESPONSES, ApiError, not_found
from longhaul.gateway.runtime import Runtime
from longhaul.gateway.schedules.records import TriggerRecord
from longhaul.gateway.schedules.store import TRIGGER_PREFIX
from longhaul.gateway.schedules.views import started_view, trigger_view
from longhaul.gateway.schemas.schedules import (
    CreateTriggerRequest,
    RunStarted,
    TriggerCreated,
    TriggerList,
    TriggerView,
)
from longhaul.gateway.usecases import scheduled_runs, triggers

router = APIRouter(prefix="/api/triggers", tags=["triggers"], responses=ERROR_RESPONSES)

MAX_WEBHOOK_BYTES = 64 * 1024
MAX_PER_KEY = 1000


@router.post("", status_code=201, response_model=TriggerCreated, summary="Create a trigger")
async def create_trigger(
    body: CreateTriggerRequest, runtime: CurrentRuntime, principal: CurrentPrincipal
) -> TriggerCreated:
    """The answer holds the secret; it is never shown again."""
    template = await scheduled_runs.checked(runtime, principal, body.template)
    store = runtime.schedule_store
    async with runtime.nats_call():
        known = await store.triggers(principal.owner)
        if len(known) >= MAX_PER_KEY:
            raise ApiError(409, "conflict", f"a key has at most {MAX_PER_KEY} triggers")
        record = TriggerRecord(
            trigger_id=f"{TRIGGER_PREFIX}_{secrets.token_hex(16)}",
            owner=principal.owner,
            name=body.name,
            template=template,
            secret="whsec_" + secrets.token_urlsafe(32),
            created_at=time.time(),
        )
        if not await store.create_trigger(record):
            raise ApiError(409, "conflict", f"you already have a trigger named {body.name}")
    view = trigger_view(record)
    return TriggerCreated(**view.model_dump(), secret=record.secret)


@router.get("", response_model=TriggerList, summary="Your triggers (without secrets)")
async def list_triggers(runtime: CurrentRuntime, principal: CurrentPrincipal) -> TriggerList:
    async with runtime.nats_call():
        records = await runtime.schedule_store.triggers(principal.owner)
    return TriggerList(triggers=[trigger_view(record) for record in records])


async def _owned(runtime: Runtime, principal: Principal, trigger_id: str) -> TriggerRecord:
    async with runtime.nats_call():
        record = await runtime.schedule_store.trigger(trigger_id, principal.owner)
    if record is None:
        raise not_found("trigger", trigger_id[:64])
    return record


@router.get("/{trigger_id}", response_model=TriggerView, summary="One trigger")
async def get_trigger(
    trigger_id: str, runtime: CurrentRuntime, principal: CurrentPrincipal
) -> TriggerView:
    return trigger_view(await _owned(runtime, principal, trigger_id))


@router.delete("/{trigger_id}", summary="Delete a trigger (its runs stay)")
async def delete_trigger(
    trigger_id: str, runtime: CurrentRuntime, principal: CurrentPrincipal
) -> dict[str, Any]:
    await _owned(runtime, principal, trigger_id)
    async with runtime.nats_call():
        await runtime.schedule_store.delete_trigger(principal.owner, trigger_id)
    return {"trigger_id": trigger_id, "deleted": True}


@router.post(
    "/{trigger_id}",
    status_code=202,
    summary="The signed webhook: start the trigger's run (no API key; the signature instead)",
    openapi_extra={"requestBody": {"content": {"application/json": {"schema": {}}}}},
)
async def fire_trigger(
    trigger_id: str,
    request: Request,
    runtime: CurrentRuntime,
    x_longhaul_timestamp: Annotated[str | None, Header(alias="X-Longhaul-Timestamp")] = None,
    x_longhaul_signature: Annotated[str | None, Header(alias="X-Longhaul-Signature")] = None,
    idempotency_key: Annotated[
        str | None, Header(alias="Idempotency-Key", pattern=r"^[!-~]{1,255}$")
    ] = None,
) -> RunStarted:
    """Headers ``X-Longhaul-Timestamp`` (Unix seconds, within 5 minutes) and
    ``X-Longhaul-Signature: sha256=<hex HMAC-SHA256 of "<timestamp>.<raw body>">``; the JSON
    body fills the template's ``{{payload.field}}``. A repeat (the same ``Idempotency-Key``,
    or the same signed request under any key) answers the first run and starts nothing. A
    sender may sign its key too (``"<timestamp>.<key>\\n<raw body>"``): then the key alone
    names the run."""
    enforce_limit(runtime.webhook_limiter, request.client.host if request.client else "")
    raw = await request.body()
    if len(raw) > MAX_WEBHOOK_BYTES:
        raise ApiError(
            413, "body_too_large", f"a webhook body is at most {MAX_WEBHOOK_BYTES} bytes"
        )
    started = await triggers.fire(
        runtime, trigger_id, raw, x_longhaul_timestamp, x_longhaul_signature, idempotency_key
    )
    return started_view(started.run_id, started.kind, started.new)
