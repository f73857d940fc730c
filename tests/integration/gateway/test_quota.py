"""A cap on the traces one key has running or waiting: the next start is a 429 with
Retry-After and nothing is written; other keys are unaffected; an ended trace frees a slot."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
from longhaul.core.index import TraceIndex
from longhaul.core.store import EventStore
from longhaul.domain import events as ev
from longhaul.domain.config import NatsConfig

from tests.integration.gateway.harness import (
    RunningGateway,
    gateway_config,
    serve_gateway,
    user_message,
)
from tests.support.stack import append_to

ALICE, BOB = "alice-quota-key-0123456789", "bob-quota-key-9876543210"
LIMIT = 2


@pytest.fixture
async def capped(nats_config: NatsConfig) -> AsyncIterator[RunningGateway]:
    config = gateway_config(nats_config, api_keys=f"{ALICE},{BOB}", max_active_traces_per_key=LIMIT)
    async with serve_gateway(config) as running:
        yield running


async def test_the_cap_refuses_a_start_without_writing_and_frees_on_stop(
    capped: RunningGateway, store: EventStore
) -> None:
    body = {"messages": [user_message("work")]}  # no executor: traces stay running
    async with capped.client(ALICE) as alice, capped.client(BOB) as bob:
        started = [(await alice.post("/api/traces", json=body)).json() for _ in range(LIMIT)]
        assert all(s["status"] == "running" for s in started)
        refused = await alice.post("/api/traces", json=body)
        assert refused.status_code == 429
        assert refused.headers["Retry-After"] == "5"
        error = refused.json()["error"]
        assert error["code"] == "too_many_active_traces"
        assert error["details"] == {"active": LIMIT, "limit": LIMIT}
        listed = (await alice.get("/api/traces")).json()["traces"]
        assert len(listed) == LIMIT  # nothing half-created
        assert (await bob.post("/api/traces", json=body)).status_code == 202  # per key

        # One ends (recorded as an executor would: no executor runs here) and frees a slot.
        first = started[0]["trace_id"]
        stopped = await append_to(store, first, ev.Stopped(reason="user"))
        await TraceIndex(store.conn).update(stopped)
        mirror = capped.runtime.mirror
        async with asyncio.timeout(10):
            await mirror.wait_until(lambda m: m.entries[first].status == "stopped")
        assert (await alice.post("/api/traces", json=body)).status_code == 202
        # Restarting the stopped trace would be a third active run: refused, nothing written.
        before = (await store.load_trace(first)).version
        assert (await alice.post(f"/api/traces/{first}/resume")).status_code == 429
        assert (await store.load_trace(first)).version == before
