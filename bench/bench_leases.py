"""What lease heartbeats cost, per executor per second, for a choice of lease TTL.

A busy executor holds one lease per running turn (64 at the default concurrency) plus its
presence key, each renewed every third of the TTL. The TTL is also how long a trace waits when
its executor dies with nobody watching (no supervisor to report it), so shorter is faster
recovery for more writes. For each TTL this measures the lease bucket's writes per second while
``HELD`` leases are kept alive (counted on the stream, not computed), and reports them as a
ratio of the server's lease-write capacity measured in the same run (the same renewals back to
back, ``HELD`` at a time).
"""

from __future__ import annotations

import argparse
import asyncio
import time

from longhaul.core import event_loop
from longhaul.core.config import NatsConfig
from longhaul.core.connection import Connection, connect
from longhaul.core.provision import ProvisionSettings
from longhaul.executor.leases import Lease, Leases

from bench.common import private_nats, report

HELD = 65
"""64 turns (the default concurrency) plus the presence key."""


async def _bucket_seq(conn: Connection, stream: str) -> int:
    info = await conn.js.stream_info(stream)
    return int(info.state.last_seq)


async def capacity(leases: Leases, held: list[Lease], seconds: float) -> float:
    """Renewals per second the server takes, ``len(held)`` leases renewed back to back."""
    done = 0
    deadline = time.monotonic() + seconds

    async def loop(lease: Lease) -> None:
        nonlocal done
        while time.monotonic() < deadline:
            lease.renewed_at = time.monotonic()
            if await lease.renew():
                done += 1

    await asyncio.gather(*(loop(lease) for lease in held))
    return done / seconds


async def heartbeat_rate(conn: Connection, ttl_s: int, window_s: float) -> float:
    names = conn.names
    leases = Leases(conn, "bench", ttl_s)
    held = [
        lease
        for n in range(HELD)
        if (lease := await leases.acquire(f"trace.bench{ttl_s}_{n}")) is not None
    ]
    keepers = [asyncio.create_task(lease.keep(lambda: None)) for lease in held]
    stream = f"KV_{names.leases}"
    await asyncio.sleep(ttl_s / 3)  # let every keeper reach its steady cadence
    before = await _bucket_seq(conn, stream)
    await asyncio.sleep(window_s)  # the measurement window itself
    writes = await _bucket_seq(conn, stream) - before
    for task in keepers:
        task.cancel()
    await asyncio.gather(*keepers, return_exceptions=True)
    for lease in held:
        await lease.release()
    return writes / window_s


async def run(ttls: list[int]) -> None:
    with private_nats() as url:
        conn = await connect(
            NatsConfig(url=url, namespace="bench_"), provision_settings=ProvisionSettings()
        )
        try:
            leases = Leases(conn, "bench-capacity", 30)
            held = [
                lease
                for n in range(HELD)
                if (lease := await leases.acquire(f"trace.cap_{n}")) is not None
            ]
            cap = await capacity(leases, held, 2.0)
            for lease in held:
                await lease.release()
            rows = []
            for ttl in ttls:
                rate = await heartbeat_rate(conn, ttl, max(4.0, 2 * ttl / 3))
                rows.append([ttl, round(rate, 1), round(rate / cap, 4), ttl])
        finally:
            await conn.close()
    report(
        "lease heartbeats per executor",
        [
            "lease TTL (s)",
            "writes/s (65 leases)",
            "share of write capacity",
            "unwatched death noticed within (s)",
        ],
        rows,
        [f"capacity: {cap:.0f} lease writes/s ({HELD} renewed back to back, same server)"],
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    event_loop.run(run([5] if args.quick else [2, 5, 10, 30]))


if __name__ == "__main__":
    main()
