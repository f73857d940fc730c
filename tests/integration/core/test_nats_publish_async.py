"""nats-py's ``publish_async`` as longhaul installs it (``longhaul.core.nats_publish_async``):
the server's error answer fails the returned future instead of leaving it pending forever."""

from __future__ import annotations

import asyncio

import pytest
from longhaul.core.store import WRONG_LAST_SEQUENCE, EventStore
from longhaul.domain.ids import new_id
from nats.js.errors import APIError


async def test_an_error_acknowledgement_fails_the_future(store: EventStore) -> None:
    conn = store.conn
    subject = conn.names.subject("trace", new_id("t"), "trace_created")
    stale = {"Nats-Expected-Last-Subject-Sequence": "7"}  # the subject has no message yet
    future = await conn.js.publish_async(subject, b"{}", headers=stale)
    with pytest.raises(APIError) as raised:
        # nats-py alone leaves this future pending for ever: the deadline would end the test
        await asyncio.wait_for(future, timeout=30)
    assert raised.value.err_code == WRONG_LAST_SEQUENCE


async def test_a_good_acknowledgement_still_resolves_the_future(store: EventStore) -> None:
    conn = store.conn
    subject = conn.names.subject("trace", new_id("t"), "trace_created")
    future = await conn.js.publish_async(subject, b"{}")
    ack = await asyncio.wait_for(future, timeout=30)
    assert ack.stream == conn.names.stream and ack.seq > 0


async def test_a_duplicate_is_reported_as_one(store: EventStore) -> None:
    conn = store.conn
    subject = conn.names.subject("trace", new_id("t"), "trace_created")
    once = {"Nats-Msg-Id": new_id("m")}
    first = await asyncio.wait_for(await conn.js.publish_async(subject, b"{}", headers=once), 30)
    again = await asyncio.wait_for(await conn.js.publish_async(subject, b"{}", headers=once), 30)
    assert not first.duplicate and again.duplicate and again.seq == first.seq
