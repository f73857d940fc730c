"""Leases in lh_leases against a real nats-server: exclusive, renewable, expiring, releasable."""

from __future__ import annotations

import asyncio
import time

import msgspec
from longhaul.core.connection import Connection
from longhaul.executor.leases import Leases, LeaseValue

from tests.support.stack import eventually


async def test_a_held_lease_excludes_others_until_released(conn: Connection) -> None:
    a, b = Leases(conn, "exec-a", 5), Leases(conn, "exec-b", 5)
    lease = await a.acquire("trace.t1")
    assert lease is not None
    assert await b.acquire("trace.t1") is None
    assert await b.holder("trace.t1") == "exec-a"
    await lease.release()
    taken = await b.acquire("trace.t1")
    assert taken is not None
    assert await a.holder("trace.t1") == "exec-b"


async def test_renewal_keeps_the_lease_past_its_ttl(conn: Connection) -> None:
    leases = Leases(conn, "exec-a", 1)
    lease = await leases.acquire("trace.t2")
    assert lease is not None
    lost: list[bool] = []
    kv = await conn.kv(conn.names.leases)
    watcher = await kv.watch("trace.t2", include_history=False)
    keeper = asyncio.create_task(lease.keep(lambda: lost.append(True)))
    try:
        # Renewals come every third of the TTL: seven of them span more than two TTLs.
        async with asyncio.timeout(10):
            renewals = 0
            while renewals < 7:
                entry = await watcher.updates(timeout=5)
                if entry is not None and entry.revision and entry.revision > 1:
                    renewals += 1
        assert await Leases(conn, "exec-b", 1).acquire("trace.t2") is None
    finally:
        keeper.cancel()
        await watcher.stop()
    assert not lost and not lease.lost.is_set()


async def test_an_unrenewed_lease_expires_and_is_taken_over(conn: Connection) -> None:
    dead = Leases(conn, "exec-dead", 1)
    assert await dead.acquire("trace.t3") is not None
    other = Leases(conn, "exec-b", 1)
    # A TTL expiry publishes nothing to wait on: poll the condition under a deadline.
    taken = await eventually(lambda: other.acquire("trace.t3"), within=10)
    assert taken is not None
    assert await other.holder("trace.t3") == "exec-b"


async def test_a_stale_holder_cannot_renew_or_release_its_successors_lease(
    conn: Connection,
) -> None:
    first = Leases(conn, "exec-a", 1)
    old = await first.acquire("trace.t4")
    assert old is not None
    await old.release()
    successor = await Leases(conn, "exec-b", 5).acquire("trace.t4")
    assert successor is not None
    old.released = False  # pretend the old holder still believes it holds the lease
    assert not await old.renew()
    assert old.lost.is_set()
    await old.release()
    assert await first.holder("trace.t4") == "exec-b"


async def test_a_lease_the_server_failed_to_expire_is_taken_over_once_stale(
    conn: Connection,
) -> None:
    """A replica that was down when the TTL ran out can lead the bucket with the key still
    there: stored without a TTL here, the value's own age decides."""
    kv = await conn.kv(conn.names.leases)
    ghost = LeaseValue(owner="exec-gone", acquired_at=time.time() - 3 * 2 - 1)
    await kv.put("trace.t9", msgspec.json.encode(ghost))
    fresh = LeaseValue(owner="exec-live", acquired_at=time.time())
    await kv.put("trace.t10", msgspec.json.encode(fresh))
    other = Leases(conn, "exec-b", 2)

    assert await other.holder("trace.t9") is None
    taken = await other.acquire("trace.t9")
    assert taken is not None
    assert await Leases(conn, "exec-c", 2).holder("trace.t9") == "exec-b"
    assert await Leases(conn, "exec-c", 2).acquire("trace.t9") is None  # now live again

    assert await other.holder("trace.t10") == "exec-live"
    assert await other.acquire("trace.t10") is None
