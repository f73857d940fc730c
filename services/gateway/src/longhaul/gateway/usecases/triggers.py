"""Fire a trigger: a signed webhook starts the run its template describes.

The signature (HMAC of timestamp and raw body, optionally the sender's idempotency key) is
checked against the trigger's secret before anything else is read; the JSON body fills the
template's ``{{payload.field}}``; the run's id is derived from the cause, so a repeat (the same
key, or the same signed request) answers the first run and starts nothing.
"""

from __future__ import annotations

import json
import time

from longhaul.gateway.auth import Principal, enforce_rate_limit
from longhaul.gateway.errors import ApiError, not_found
from longhaul.gateway.runtime import Runtime
from longhaul.gateway.schedules import payload, signing
from longhaul.gateway.usecases import scheduled_runs


async def fire(
    runtime: Runtime,
    trigger_id: str,
    raw: bytes,
    timestamp: str | None,
    signature: str | None,
    idempotency_key: str | None,
) -> scheduled_runs.Started:
    """Start (or find) the run of one signed webhook call; 404 for an unknown trigger or a
    revoked key's, 401 for a bad signature."""
    async with runtime.nats_call():
        trigger = await runtime.schedule_store.trigger(trigger_id)
    if trigger is None or not runtime.keys.admits(trigger.owner):  # a revoked key's: unknown
        raise not_found("trigger", trigger_id[:64])
    now = time.time()
    key_signed = signing.verify(trigger.secret, timestamp, signature, raw, now, idempotency_key)
    enforce_rate_limit(runtime.limiter, Principal(owner=trigger.owner))
    try:
        data = json.loads(raw)
    except (ValueError, RecursionError):
        raise ApiError(400, "malformed_json", "the webhook body is not JSON") from None
    limit = runtime.config.gateway.max_body_bytes
    try:
        template = payload.render(trigger.template, data, limit)
    except payload.TooLarge as exc:
        raise ApiError(413, "body_too_large", f"{exc} (gateway.max_body_bytes)") from None
    cause = ("key", idempotency_key) if idempotency_key else ("signed", str(signature))
    run_id = scheduled_runs.derived_run_id(template.kind, trigger.trigger_id, *cause)
    if not key_signed:  # an unsigned key could be anyone's: the signature claims one run
        async with runtime.nats_call():
            run_id = await runtime.schedule_store.claim_signature(
                trigger.trigger_id, str(signature), run_id
            )
    return await scheduled_runs.start(
        runtime, trigger.owner, template, run_id, trigger_id=trigger.trigger_id
    )
