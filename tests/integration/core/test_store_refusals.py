"""A "wrong last sequence" refusal is settled by the log, never taken on trust.

nats-server checks ``Nats-Expected-Last-Subject-Sequence`` before the ``Nats-Msg-Id``, so a
retried publish whose first attempt landed is refused, not answered as a duplicate; and a
refusal can come while nothing follows the expected position yet. Either way an append must
report its own event once, never a false conflict, never a second copy.
"""

from __future__ import annotations

import asyncio
import os
import signal
import time
from pathlib import Path

import pytest
from longhaul.core.config import NatsConfig
from longhaul.core.connection import connect
from longhaul.core.nats_server import NatsServer
from longhaul.core.provision import ProvisionSettings
from longhaul.core.store import (
    WRONG_LAST_SEQUENCE,
    ConcurrencyError,
    EventStore,
    Outgoing,
    PendingAppend,
    Position,
    stamp,
)
from longhaul.domain import events as ev
from longhaul.domain.ids import new_id
from nats.js.errors import APIError

TRACES = 120
PAUSE_S = 0.4


def created(text: str) -> ev.TraceCreated:
    return ev.TraceCreated(messages=[ev.InputMessage(role="user", content=text)])


def reply(text: str) -> ev.MessageAppended:
    return ev.MessageAppended(sequence=2, parent_sequence=1, role="assistant", content=text)


async def own_event_at(store: EventStore, seq: int) -> ev.Event:
    return ev.decode((await store.conn.js.get_msg(store.conn.names.stream, seq)).data or b"")


async def log_of(store: EventStore, trace_id: str) -> list[int]:
    return [r.seq async for r in store.replay("trace", trace_id)]


async def test_first_appends_through_a_paused_server_land_once_each(tmp_path: Path) -> None:
    """Many new traces from one connection, acks late past a 100 ms publish timeout (the
    server stopped for 0.4 s): the retries are refused, and each append still returns its own
    event. Checked through a second connection with the usual timeouts."""
    with NatsServer(tmp_path / "js", port=0, log_file=tmp_path / "nats.log") as server:
        config = NatsConfig(url=server.url, namespace="p_")
        hurried = await connect(
            config.model_copy(update={"request_timeout_s": 0.1}),
            provision_settings=ProvisionSettings(),
        )
        checking = await connect(config)
        store, check = EventStore(hurried), EventStore(checking)
        ids = [new_id("t") for _ in range(TRACES)]
        appends = [
            asyncio.ensure_future(
                store.append("trace", i, [created(i), reply(i)], expected=Position())
            )
            for i in ids
        ]
        assert server.pid is not None
        os.kill(server.pid, signal.SIGSTOP)
        try:
            await asyncio.sleep(PAUSE_S)  # the fault itself: acks come late, attempts time out
        finally:
            os.kill(server.pid, signal.SIGCONT)
        # A bound past the appends' own retry deadline (unavailable_retry_s, 20 s)
        async with asyncio.timeout(40):
            results = await asyncio.gather(*appends)
        for trace_id, recorded in zip(ids, results, strict=True):
            assert [r.event.n for r in recorded] == [1, 2]
            assert await log_of(check, trace_id) == [r.seq for r in recorded]  # once each
            for r in recorded:  # the sequence an append reports holds its own event
                stored = await own_event_at(check, r.seq)
                assert (stored.aggregate_id, stored.n) == (trace_id, r.event.n)
        await hurried.close()
        await checking.close()


async def test_an_append_answered_with_another_publishs_refusal_still_lands_once(
    store: EventStore,
) -> None:
    """The crossed acknowledgement the import writer was suspected of seeing: another
    subject's real refusal reaches a first append that never reached the server. The log says
    the slot is free, so it is published again and lands; settled again it is found, not
    written twice."""
    conn = store.conn
    other = conn.names.subject("trace", new_id("t"), "trace_created")
    foreign = await conn.js.publish_async(
        other, b"{}", headers={"Nats-Expected-Last-Subject-Sequence": "7"}
    )
    with pytest.raises(APIError) as refused:
        await asyncio.wait_for(asyncio.shield(foreign), timeout=5)
    assert refused.value.err_code == WRONG_LAST_SEQUENCE

    trace_id = new_id("t")
    event = stamp(
        created("mine"), "trace", trace_id, 1, actor="t", causation_id=None, correlation_id=None
    )

    def pending() -> PendingAppend:
        subject = conn.names.subject("trace", trace_id, event.type)
        headers = store.append_headers(event, 0)
        message = Outgoing(subject, ev.encode(event), headers)
        return PendingAppend(store, [event], [message], 0, foreign)

    [recorded] = await pending().settle()
    assert await log_of(store, trace_id) == [recorded.seq]
    assert (await own_event_at(store, recorded.seq)) == event
    assert (await pending().settle())[0].seq == recorded.seq  # found, not written twice
    assert await log_of(store, trace_id) == [recorded.seq]


async def test_a_refusal_past_the_end_of_the_log_is_a_conflict_at_once(store: EventStore) -> None:
    """An expected position the log does not reach (a stale or erased one) is a real conflict:
    answered at once, not retried until the deadline, and nothing written."""
    trace_id = new_id("t")
    [first] = await store.append("trace", trace_id, [created("one")], expected=Position())
    started = time.monotonic()
    with pytest.raises(ConcurrencyError, match="moved past"):
        await store.append("trace", trace_id, [reply("x")], expected=Position(first.seq + 50, 1))
    assert time.monotonic() - started < 10  # retrying would take unavailable_retry_s (20 s)
    assert await log_of(store, trace_id) == [first.seq]
