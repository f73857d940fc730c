"""The current entries of a JetStream KV bucket under a key pattern, in one watch.

``KeyValue.keys()`` watches the whole bucket and filters on the client; a watch on the
pattern with ``ignore_deletes`` delivers the latest value of each matching key and then
``None``, so a listing costs what it returns.
"""

from __future__ import annotations

from nats.errors import TimeoutError as NatsTimeoutError
from nats.js.kv import KeyValue

LIST_TIMEOUT_S = 5.0


async def current_entries(
    kv: KeyValue, pattern: str, *, timeout_s: float = LIST_TIMEOUT_S
) -> list[KeyValue.Entry]:
    """Latest non-empty entry of every key matching ``pattern`` (``*`` / ``>`` wildcards)."""
    watcher = await kv.watch(pattern, ignore_deletes=True)
    found: list[KeyValue.Entry] = []
    try:
        while True:
            try:
                entry = await watcher.updates(timeout=timeout_s)  # type: ignore[no-untyped-call]
            except NatsTimeoutError:
                return found
            if entry is None:  # the end of what is stored now
                return found
            if entry.value:
                found.append(entry)
    finally:
        await watcher.stop()  # type: ignore[no-untyped-call]
