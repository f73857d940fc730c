"""The current entries of a JetStream KV bucket under a key pattern, in one pass.

``KeyValue.keys()`` watches the whole bucket and filters on the client; an ordered consumer on
the pattern delivering the last message per key reads what matches and nothing else, so a
listing costs what it returns.

It is not nats-py's ``watch``: that one decides it has seen everything when the consumer's
info says nothing is pending and no message has reached the client yet, but the server may
have delivered a message whose bytes arrive after the info's reply (two internal senders, one
socket), and the listing then ends without it (a trigger name taken twice, an eval run missing
from its eval). Here the end is what the server says: nothing ever delivered and nothing
pending, or the delivered message that leaves none pending.
"""

from __future__ import annotations

import asyncio

from nats.errors import TimeoutError as NatsTimeoutError
from nats.js import api
from nats.js.kv import KV_DEL, KV_MARKER_REASON, KV_OP, KV_PURGE, KeyValue

LIST_TIMEOUT_S = 5.0
_REMOVED = {KV_DEL, KV_PURGE}
_REMOVED_REASONS = {"MaxAge", "Purge", "Remove"}
"""Markers nats-server 2.11+ places itself (TTL, age): the key is gone."""


async def current_entries(
    kv: KeyValue, pattern: str, *, timeout_s: float = LIST_TIMEOUT_S
) -> list[KeyValue.Entry]:
    """Latest non-empty entry of every key matching ``pattern`` (``*`` / ``>`` wildcards);
    a NATS timeout when the server does not deliver them within ``timeout_s``."""
    # nats-py has no public accessor for the bucket's stream and subject prefix
    prefix, stream, js = kv._pre, kv._stream, kv._js
    sub = await js.subscribe(
        f"{prefix}{pattern}",
        stream=stream,
        ordered_consumer=True,
        deliver_policy=api.DeliverPolicy.LAST_PER_SUBJECT,
        pending_msgs_limit=-1,
        pending_bytes_limit=-1,
    )
    found: list[KeyValue.Entry] = []
    try:
        info = await sub.consumer_info()
        if info.num_pending == 0 and not (info.delivered and info.delivered.consumer_seq):
            return found
        async with asyncio.timeout(timeout_s):
            async for msg in sub.messages:
                meta = msg.metadata
                headers = msg.header or {}
                removed = (
                    headers.get(KV_OP) in _REMOVED
                    or headers.get(KV_MARKER_REASON) in _REMOVED_REASONS
                )
                if not removed and msg.data:
                    found.append(
                        KeyValue.Entry(
                            bucket=kv._name,
                            key=msg.subject[len(prefix) :],
                            value=msg.data,
                            revision=meta.sequence.stream,
                            delta=meta.num_pending,
                            created=None,
                            operation=None,
                        )
                    )
                if meta.num_pending == 0:
                    return found
    except TimeoutError:
        raise NatsTimeoutError from None
    finally:
        await sub.unsubscribe()
    return found
