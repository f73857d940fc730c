"""A consumer loop stops when told, not when its idle long-poll happens to expire."""

from __future__ import annotations

import asyncio

from longhaul.core.connection import Connection
from longhaul.core.consumer import ConsumerSpec, Delivery, consume
from nats.js.errors import NotFoundError

from tests.support.stack import eventually

LONG_POLL_S = 60.0
STOP_DEADLINE_S = 10.0


async def test_an_idle_consumer_stops_without_waiting_out_its_long_poll(
    conn: Connection,
) -> None:
    """Every service's stop (and every test stack's teardown) waited for the pending fetch,
    up to ``fetch_timeout_s``; here a poll far longer than the deadline must not hold it."""
    seen: asyncio.Queue[str] = asyncio.Queue()

    async def handler(delivery: Delivery) -> None:
        await seen.put(delivery.aggregate_id)

    shutdown = asyncio.Event()
    spec = ConsumerSpec(
        durable="stop-test",
        subjects=[conn.names.type_filter("trace", "trace_created")],
        fetch_timeout_s=LONG_POLL_S,
    )
    consuming = asyncio.create_task(consume(conn, spec, handler, shutdown))

    async def polling() -> bool:  # its pull request is outstanding on the server
        try:
            info = await conn.js.consumer_info(conn.names.stream, "stop-test")
        except NotFoundError:  # not created yet
            return False
        return info.num_waiting > 0

    await eventually(polling, within=STOP_DEADLINE_S)
    shutdown.set()
    async with asyncio.timeout(STOP_DEADLINE_S):
        await consuming
    assert seen.empty()
