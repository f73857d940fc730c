"""A stream limited to a few MB fills under load, through the running stack: no 5xx, nothing
already written is lost, new runs answer 507, running traces stop with ``storage_full`` once
their calls are answered, ``/readyz`` and ``/metrics`` say so, and once a delete frees room a
stopped trace continues to its end."""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx
from longhaul.core.config import LonghaulConfig, NatsConfig, StoreConfig
from longhaul.core.connection import Connection
from longhaul.core.store import EventStore
from longhaul.domain.state import TraceState
from pydantic import ByteSize

from tests.integration.executor.scripts import bulky_steps
from tests.integration.gateway.harness import gateway_config, serve_gateway, user_message
from tests.support.stack import InProcessExecutor, eventually, wait_for_trace

LIMIT = 1024 * 1024
STORE = StoreConfig(max_bytes=ByteSize(LIMIT), headroom=0.25)
SCRAPER = "storage-scraper-key-0123456789"
STEPS = 8
TRACES = 3
DEADLINE_S = 60


def not_run(state: TraceState) -> int:
    return sum(
        m.role == "tool" and "trace stopped" in str(m.content) for m in state.messages.values()
    )


def ended(state: TraceState) -> bool:
    return state.is_final


async def ready_again(client: httpx.AsyncClient) -> bool:
    return bool((await client.get("/readyz")).json()["status"] == "ok")


async def start(client: httpx.AsyncClient, model: str) -> httpx.Response:
    return await client.post("/api/traces", json={"messages": [user_message("go")], "model": model})


async def test_a_full_stream_refuses_new_runs_stops_running_ones_and_loses_nothing(
    nats_config: NatsConfig, conn: Connection, nats_url: str, namespace: str, tmp_path: Path
) -> None:
    # Each step holds long enough that the waves started before the fill are still running
    # when it comes, however fast the executor is: the fill stops some of them mid-run.
    model = bulky_steps(
        tmp_path / "bulky.yaml", STEPS, tmp_path / "steps.log", pad=6_000, hold_ms=250
    )
    config = gateway_config(nats_config, metrics_keys=[SCRAPER]).model_copy(update={"store": STORE})
    executor_config = LonghaulConfig(nats=nats_config, store=STORE)
    store = EventStore(conn)
    async with (
        serve_gateway(config) as gateway,
        InProcessExecutor(
            nats_url,
            namespace,
            config=executor_config,
            lease_ttl_s=STORE.lease_ttl_s,
            settings={
                "tool_modules": ["tests.integration.executor.tooling"],
                "working_root": tmp_path,
            },
        ),
        gateway.client() as client,
    ):
        # load: traces started while the stream fills; every answer is a start or a 507
        started: list[str] = []
        refusal: httpx.Response | None = None
        async with asyncio.timeout(DEADLINE_S):
            while refusal is None:
                answers = await asyncio.gather(*(start(client, model) for _ in range(TRACES)))
                for answer in answers:
                    assert answer.status_code in (202, 507), answer.text
                    if answer.status_code == 202:
                        started.append(answer.json()["trace_id"])
                    else:
                        refusal = answer
                await asyncio.sleep(0.2)  # the next wave while these write
        assert refusal.json()["error"]["code"] == "insufficient_storage"
        assert "store.max_bytes" in refusal.json()["error"]["message"]
        assert refusal.headers["Retry-After"]

        states = [await wait_for_trace(store, t, ended, within=DEADLINE_S) for t in started]
        stopped = [s for s in states if s.status == "stopped"]
        assert stopped and all(s.stop_reason == "storage_full" for s in stopped)
        assert {s.status for s in states} <= {"completed", "stopped"}
        # every call is answered; those in flight were answered for real before the stop (a
        # call a lost lease cut off, which a loaded machine may cause, is answered "not run")
        assert not any(s.unanswered_tool_calls() for s in stopped)
        assert any(not_run(s) == 0 for s in stopped)

        # nothing written was lost: the stream starts at 1 and holds every trace's events
        info = await conn.js.stream_info(conn.names.stream)
        assert info.state.first_seq == 1 and info.state.bytes <= LIMIT
        folded = [await wait_for_trace(store, t, ended) for t in started]
        assert sum(s.version for s in folded) == info.state.messages
        assert not any(s.faults for s in folded)

        ready = await client.get("/readyz")
        assert ready.status_code == 200 and ready.json()["status"] == "storage_full", ready.text
        assert "store.max_bytes" in ready.json()["checks"]["storage"]
        scraped = await client.get("/metrics", headers={"Authorization": f"Bearer {SCRAPER}"})
        figures = dict(line.rsplit(" ", 1) for line in scraped.text.splitlines() if line[:1] != "#")
        assert float(figures['longhaul_storage_limit_bytes{store="events"}']) == LIMIT
        used = float(figures['longhaul_storage_used_bytes{store="events"}'])
        left = float(figures['longhaul_storage_left_bytes{store="events"}'])
        assert used > LIMIT * 0.75 and used + left == LIMIT
        assert figures["longhaul_storage_full"] == "1.0"

        # room comes back: the completed traces go, a stopped one continues to its end
        for state in states:
            if state.status == "completed":
                assert (await client.delete(f"/api/traces/{state.trace_id}")).status_code == 200
        if len(stopped) > 1:
            for state in stopped[1:]:
                await client.delete(f"/api/traces/{state.trace_id}")
        again = stopped[0].trace_id
        await eventually(lambda: ready_again(client), within=10)  # the gauge rereads JetStream
        resumed = await client.post(f"/api/traces/{again}/run", json={})
        assert resumed.status_code == 202, resumed.text
        done = await wait_for_trace(
            store, again, lambda s: s.status == "completed", within=DEADLINE_S
        )
        assert done.messages[done.head_sequence].content == "all steps done"
