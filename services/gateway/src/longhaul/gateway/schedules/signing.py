"""The webhook signature: ``X-Longhaul-Signature: sha256=<hex HMAC-SHA256 of
"<timestamp>.<raw body>">`` with the trigger's secret, ``X-Longhaul-Timestamp`` in Unix
seconds. The timestamp is inside what is signed, so an old request cannot be re-dated; one
replayed within the window answers the run it started and starts nothing, whatever
``Idempotency-Key`` it comes with: each signature claims its run once
(``ScheduleStore.claim_signature``).

A sender may also sign its ``Idempotency-Key``: ``"<timestamp>.<key>\\n<raw body>"``. Then
the key is authenticated and alone names the run, so two deliveries of the same body within
one second under different keys are two runs (under the plain form they are one: a replay
under a new key cannot be told from them). No JSON body splits at a newline into a key and
another JSON body, so neither form passes for the other."""

from __future__ import annotations

import hashlib
import hmac

from longhaul.gateway.errors import ApiError

TOLERANCE_S = 300
PREFIX = "sha256="


def signature(secret: str, timestamp: str, body: bytes, key: str | None = None) -> str:
    """The header value a sender computes (also what the example in
    docs/05-schedules-and-notifications.md does); ``key``: the ``Idempotency-Key``, when the
    sender signs it too."""
    signed = timestamp.encode() + b"." + (f"{key}\n".encode() if key else b"") + body
    return PREFIX + hmac.new(secret.encode(), signed, hashlib.sha256).hexdigest()


def verify(
    secret: str,
    timestamp: str | None,
    sent: str | None,
    body: bytes,
    now: float,
    key: str | None = None,
) -> bool:
    """Refuse (401) a missing, stale or wrong signature; True when it signs ``key`` (the
    request's ``Idempotency-Key``) too."""
    if not timestamp or not sent:
        raise ApiError(
            401,
            "invalid_signature",
            "send X-Longhaul-Timestamp and X-Longhaul-Signature: sha256=<hex HMAC-SHA256 of "
            '"<timestamp>.<raw body>" with the trigger\'s secret>',
        )
    if not timestamp.isascii() or not timestamp.isdigit() or len(timestamp) > 12:
        raise ApiError(401, "stale_timestamp", "X-Longhaul-Timestamp must be Unix seconds")
    if abs(now - int(timestamp)) > TOLERANCE_S:
        raise ApiError(
            401,
            "stale_timestamp",
            f"X-Longhaul-Timestamp is more than {TOLERANCE_S} s away from the gateway's clock",
        )
    if key and hmac.compare_digest(signature(secret, timestamp, body, key).encode(), sent.encode()):
        return True
    if not hmac.compare_digest(signature(secret, timestamp, body).encode(), sent.encode()):
        raise ApiError(401, "invalid_signature", "the signature does not match the body")
    return False
