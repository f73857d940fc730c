"""One key of a JetStream KV bucket, read the way every reader here wants it."""

from __future__ import annotations

from nats.js.errors import KeyNotFoundError
from nats.js.kv import KeyValue


async def get_entry(kv: KeyValue, key: str) -> KeyValue.Entry | None:
    """The key's latest entry, or ``None`` when the bucket holds none (never written,
    deleted, purged or expired). An entry may still have an empty value: a caller that
    treats that as absent says so."""
    try:
        return await kv.get(key)
    except KeyNotFoundError:
        return None
