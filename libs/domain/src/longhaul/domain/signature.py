"""The one signature scheme of longhaul's webhooks, both ways (notifications it sends,
requests it receives): ``X-Longhaul-Timestamp: <unix seconds>`` and
``X-Longhaul-Signature: sha256=<hex HMAC-SHA256 of "<timestamp>.<raw body>">``. The timestamp
is signed with the body, so a receiver that refuses old timestamps refuses replays."""

from __future__ import annotations

import hashlib
import hmac

TIMESTAMP_HEADER = "X-Longhaul-Timestamp"
SIGNATURE_HEADER = "X-Longhaul-Signature"


def sign(secret: str, timestamp: str, body: bytes) -> str:
    """The signature header's value for ``body`` sent at ``timestamp``."""
    mac = hmac.new(secret.encode(), timestamp.encode() + b"." + body, hashlib.sha256)
    return "sha256=" + mac.hexdigest()


def verify(secret: str, timestamp: str, body: bytes, signature: str) -> bool:
    """True when ``signature`` is ``body``'s at ``timestamp`` (compared in constant time)."""
    return hmac.compare_digest(sign(secret, timestamp, body), signature)
