"""A schedule under ``longhaul up``: a tick every 2 s starts exactly one run per tick through
a ``kill -9`` of the gateway (which runs the ticker) and the planner at a tick, and a stop
and start of everything (nats-server included) on the same data dir. Counted from the log:
the ``trace_created`` events naming the schedule, one per consecutive tick, none twice, none
missing (``catch_up: all`` starts the ticks that fell while nothing ran)."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import signal
import time
from datetime import datetime
from pathlib import Path

import pytest
from longhaul.client import AsyncClient
from longhaul.core.connection import connect

from tests.chaos.up import Up, admin_config
from tests.support.env import service_env
from tests.support.jetstream import created_events

EVERY_S = 2.0
DEADLINE_S = 60.0
TEMPLATE = {
    "kind": "trace",
    "body": {"messages": [{"role": "user", "content": "tick"}], "model": "scripted:auto"},
}


def _epoch(text: str) -> float:
    return datetime.fromisoformat(text).timestamp()


async def _runs(
    url: str, schedule_id: str, at_least: int, after: float = 0.0
) -> list[tuple[str, float]]:
    """(run id, tick) of the schedule's runs once it lists ``at_least`` of them, one for a
    tick past ``after`` among them."""
    deadline = time.monotonic() + DEADLINE_S
    while True:
        with contextlib.suppress(Exception):  # the gateway may be restarting
            async with AsyncClient(url, timeout=5) as client:
                runs = (await client.schedule_runs(schedule_id)).runs
                if len(runs) >= at_least and any(_epoch(r.tick) > after for r in runs):
                    return [(run.run_id, _epoch(run.tick)) for run in runs]
        assert time.monotonic() < deadline, f"the schedule never listed {at_least} runs"
        await asyncio.sleep(0.2)


async def _restarted(up: Up, service: str, old_pid: int) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while up.pid_of(service) in (None, old_pid):
        assert time.monotonic() < deadline, f"{service} was not restarted"
        await asyncio.sleep(0.1)


@pytest.mark.slow
async def test_one_run_per_tick_through_kills_at_the_tick_and_a_full_restart(
    tmp_path: Path,
) -> None:
    up = Up(tmp_path, {**service_env(), "PYTHONUNBUFFERED": "1"})
    state = await up.start()
    try:
        async with AsyncClient(state["gateway"], timeout=30) as client:
            schedule = await client.create_schedule(
                "ticks", TEMPLATE, every_s=EVERY_S, overlap="allow", catch_up="all"
            )
        sid = schedule.schedule_id
        await _runs(state["gateway"], sid, 1)
        async with AsyncClient(state["gateway"], timeout=30) as client:
            upcoming = (await client.get_schedule(sid)).next_run_at
        assert upcoming is not None
        # aim the kills at the tick itself: the ticker is starting that run as they land
        await asyncio.sleep(max(0.0, _epoch(upcoming) - time.time()))
        killed = {}
        for service in ("gateway", "planner"):
            pid = up.pid_of(service)
            assert pid is not None
            os.kill(pid, signal.SIGKILL)
            killed[service] = pid
        for service, pid in killed.items():
            await _restarted(up, service, pid)
        before_restart = len(await _runs(state["gateway"], sid, 3))

        await up.stop()
        state = await up.start()  # everything again, on the same data dir
        back = time.time()
        # the ticks that fell while nothing ran are started one by one, then the live ones
        runs = await _runs(state["gateway"], sid, before_restart + 1, after=back)
        async with AsyncClient(state["gateway"], timeout=30) as client:
            await client.update_schedule(sid, paused=True)
        runs = await _runs(state["gateway"], sid, len(runs))

        conn = await connect(admin_config(state))
        try:
            on_log = [
                e.aggregate_id
                for e in await created_events(conn, "trace")
                if getattr(e, "schedule_id", None) == sid
            ]
        finally:
            await conn.close()
        ticks = sorted(tick for _, tick in runs)
        assert sorted(on_log) == sorted(run_id for run_id, _ in runs)  # none unlisted, none twice
        gaps = [round(b - a, 3) for a, b in itertools.pairwise(ticks)]
        assert gaps and all(gap == EVERY_S for gap in gaps), gaps  # no tick missing or doubled
        assert len(runs) >= before_restart + 3
    finally:
        await up.stop()
