"""The webhook signature: ``X-Longhaul-Signature: sha256=<hex HMAC-SHA256 of
"<timestamp>.<raw body>">`` with the trigger's secret, ``X-Longhaul-Timestamp`` in Unix
seconds. The timestamp is inside what is signed, so an old request cannot be re-dated; one
replayed within the window names the same run (``routers/triggers``) and starts nothing.

An ``Idempotency-Key`` names the run instead of the signature, so it is signed too:
``"<timestamp>.<key>\\n<raw body>"``. Unsigned, a captured request replayed with keys of the
replayer's choosing would start a run per key. (No JSON body splits at a newline into a key
and another JSON body, so neither form can pass for the other.)"""

from __future__ import annotations

import hashlib
import hmac

from longhaul.gateway.errors import ApiError

TOLERANCE_S = 300
PREFIX = "sha256="


def signature(secret: str, timestamp: str, body: bytes, key: str | None = None) -> str:
    """The header value a sender computes (also what the README's example does)."""
    signed = timestamp.encode() + b"." + (f"{key}\n".encode() if key else b"") + body
    return PREFIX + hmac.new(secret.encode(), signed, hashlib.sha256).hexdigest()


def verify(
    secret: str,
    timestamp: str | None,
    sent: str | None,
    body: bytes,
    now: float,
    key: str | None = None,
) -> None:
    """Refuse (401) a missing, stale or wrong signature (``key``: the Idempotency-Key)."""
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
    if not hmac.compare_digest(signature(secret, timestamp, body, key).encode(), sent.encode()):
        signed = '"<timestamp>.<Idempotency-Key>\\n<raw body>"' if key else "the body"
        raise ApiError(401, "invalid_signature", f"the signature does not match {signed}")
