"""A schedule ticking every second starts exactly one run per tick through a ``kill -9`` of
the gateway (which runs the ticker) and the planner at a tick, followed by a restart of
everything: nats-server on the same store, gateway, planner (one restart for both, to keep
the test cheap). The services are real subprocesses on a nats-server of the test's own.
Counted from the log: the ``trace_created`` events naming the schedule, one per consecutive
tick, none twice, none missing (``catch_up: all`` starts the ticks that fell while nothing
ran)."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import signal
import sys
import time
from datetime import datetime
from pathlib import Path

import httpx
from longhaul.client import AsyncClient
from longhaul.core.config import NatsConfig
from longhaul.core.connection import connect
from longhaul.core.nats_server import NatsServer, free_port

from tests.support.env import service_env
from tests.support.jetstream import created_events

EVERY_S = 1.0
DEADLINE_S = 45.0
TEMPLATE = {
    "kind": "trace",
    "body": {"messages": [{"role": "user", "content": "tick"}], "model": "scripted:auto"},
}
MODULES = {"gateway": "longhaul.gateway.main", "planner": "longhaul.planner.main"}


class Services:
    """The gateway and the planner as subprocesses; ``kill`` is a ``kill -9``."""

    def __init__(self, root: Path, env: dict[str, str], url: str) -> None:
        self.root, self.env, self.url = root, env, url
        self.processes: dict[str, asyncio.subprocess.Process] = {}

    async def start(self) -> None:
        for name, module in MODULES.items():
            out = os.open(self.root / f"{name}.log", os.O_WRONLY | os.O_CREAT | os.O_APPEND)
            try:
                self.processes[name] = await asyncio.create_subprocess_exec(
                    sys.executable, "-m", module, env=self.env, stdout=out, stderr=out
                )
            finally:
                os.close(out)
        deadline = time.monotonic() + DEADLINE_S
        async with httpx.AsyncClient(timeout=1.0) as http:
            while True:  # readiness is only observable by asking
                with contextlib.suppress(httpx.HTTPError):
                    if (await http.get(self.url + "/healthz")).status_code == 200:
                        return
                assert time.monotonic() < deadline, f"gateway not up; see {self.root}"
                await asyncio.sleep(0.1)

    async def kill(self) -> None:
        for process in self.processes.values():
            process.send_signal(signal.SIGKILL)
            await process.wait()

    async def stop(self) -> None:
        for process in self.processes.values():
            if process.returncode is None:
                process.send_signal(signal.SIGTERM)
        for process in self.processes.values():
            try:
                await asyncio.wait_for(process.wait(), timeout=15)
            except TimeoutError:
                process.kill()
                await process.wait()


def _epoch(text: str) -> float:
    return datetime.fromisoformat(text).timestamp()


async def _runs(url: str, schedule_id: str, past: float) -> list[tuple[str, float]]:
    """(run id, tick) of the schedule's runs once one of them is for a tick after ``past``."""
    deadline = time.monotonic() + DEADLINE_S
    async with AsyncClient(url, timeout=5) as client:
        while True:
            runs = (await client.schedule_runs(schedule_id)).runs
            if any(_epoch(run.tick) > past for run in runs):
                return [(run.run_id, _epoch(run.tick)) for run in runs]
            assert time.monotonic() < deadline, f"no run for a tick after {past}"
            await asyncio.sleep(0.1)


async def _listed_as_on_log(
    client: AsyncClient, nats_url: str, schedule_id: str
) -> tuple[list[tuple[str, float]], list[str]]:
    """The schedule's runs and the runs on the log, once they match (or at the deadline): the
    pause may land while a catching-up pass starts a tick, whose run is recorded just after."""
    conn = await connect(NatsConfig(url=nats_url))
    deadline = time.monotonic() + DEADLINE_S
    try:
        while True:
            listed = (await client.schedule_runs(schedule_id)).runs
            runs = [(r.run_id, _epoch(r.tick)) for r in listed]
            on_log = [
                e.aggregate_id
                for e in await created_events(conn, "trace")
                if getattr(e, "schedule_id", None) == schedule_id
            ]
            if sorted(on_log) == sorted(run_id for run_id, _ in runs):
                return runs, on_log
            if time.monotonic() > deadline:
                return runs, on_log  # the caller's assertion says what differs
            await asyncio.sleep(0.1)
    finally:
        await conn.close()


async def test_one_run_per_tick_through_kills_at_the_tick_and_a_restart_of_everything(
    tmp_path: Path,
) -> None:
    nats = NatsServer(tmp_path / "js", port=0).start()
    url = f"http://127.0.0.1:{free_port()}"
    env = {
        **service_env(),
        "LONGHAUL_NATS__URL": nats.url,
        "LONGHAUL_GATEWAY__PORT": url.rsplit(":", 1)[1],
        "PYTHONUNBUFFERED": "1",
    }
    services = Services(tmp_path, env, url)
    try:
        await services.start()
        async with AsyncClient(url, timeout=30) as client:
            schedule = await client.create_schedule(
                "ticks", TEMPLATE, every_s=EVERY_S, overlap="allow", catch_up="all"
            )
            sid = schedule.schedule_id
            await _runs(url, sid, past=0)
            upcoming = (await client.get_schedule(sid)).next_run_at
        assert upcoming is not None
        # aim the kills at the tick itself: the ticker is starting that run as they land
        await asyncio.sleep(max(0.0, _epoch(upcoming) - time.time()))
        await services.kill()
        nats.stop()  # and then everything is down
        nats = NatsServer(tmp_path / "js", port=nats.port).start()  # on the same store
        await services.start()
        runs = await _runs(url, sid, past=time.time())
        async with AsyncClient(url, timeout=30) as client:
            await client.update_schedule(sid, paused=True)
            runs, on_log = await _listed_as_on_log(client, nats.url, sid)
        ticks = sorted(tick for _, tick in runs)
        assert sorted(on_log) == sorted(run_id for run_id, _ in runs)  # none unlisted, none twice
        gaps = [round(b - a, 3) for a, b in itertools.pairwise(ticks)]
        assert len(gaps) >= 4 and all(gap == EVERY_S for gap in gaps), gaps  # none missing
    finally:
        await services.stop()
        nats.stop()
