"""A cap on the traces one key has running or waiting: the next start is a 429 with
Retry-After and nothing is written; other keys are unaffected; an ended trace frees a slot."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
from longhaul.core.config import NatsConfig
from longhaul.core.index import TraceIndex
from longhaul.core.store import EventStore, Position
from longhaul.domain import events as ev

from tests.integration.gateway.harness import (
    RunningGateway,
    gateway_config,
    serve_gateway,
    user_message,
)
from tests.integration.gateway.test_tasks_api import planner_appends
from tests.support.folds import task_state, trace_state
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
        before = (await trace_state(store, first)).version
        assert (await alice.post(f"/api/traces/{first}/resume")).status_code == 429
        assert (await trace_state(store, first)).version == before


async def test_tasks_and_runs_count_against_the_cap_however_they_start(
    capped: RunningGateway, store: EventStore
) -> None:
    trace = {"messages": [user_message("work")]}
    async with capped.client(ALICE) as alice, capped.client(BOB) as bob:
        first = await alice.post("/api/tasks", json={"goal": "compare three databases"})
        second = await alice.post("/api/runs", json={"goal": "plan a trip", "mode": "task"})
        assert first.status_code == second.status_code == 202
        assert second.json()["kind"] == "task"
        # The second task's step trace, as the planner starts it: the task counts once.
        owner = (await alice.get("/api/info")).json()["owner"]
        step = ev.TraceCreated(
            messages=[ev.InputMessage(role="user", content="step")],
            owner=owner,
            task_id=second.json()["task_id"],
            phase_id="p1",
        )
        await store.append("trace", "t_step_quota", [step], expected=Position(), actor="test")
        await TraceIndex(store.conn).update(await trace_state(store, "t_step_quota"))
        async with asyncio.timeout(10):
            await capped.runtime.mirror.wait_until(lambda m: "t_step_quota" in m.entries)
        before = (await store.conn.js.stream_info(store.names.stream)).state.messages
        for refused in (
            await alice.post("/api/traces", json=trace),
            await alice.post("/api/tasks", json={"goal": "one more"}),
            await alice.post("/api/runs", json={"goal": "one more", "mode": "task"}),
            await alice.post("/api/runs", json={"goal": "one more", "mode": "trace"}),
        ):
            assert refused.status_code == 429
            assert refused.headers["Retry-After"] == "5"
            error = refused.json()["error"]
            assert error["code"] == "too_many_active_traces"
            assert error["details"] == {"active": LIMIT, "limit": LIMIT}
        assert (await store.conn.js.stream_info(store.names.stream)).state.messages == before
        assert (await bob.post("/api/tasks", json={"goal": "per key"})).status_code == 202

        # A failed task frees its slot; resuming it would be a third active run.
        task_id = first.json()["task_id"]
        await planner_appends(store, task_id, ev.TaskFailed(error="planner gave up"))
        assert (await alice.post("/api/traces", json=trace)).status_code == 202
        resumed = await alice.post(f"/api/tasks/{task_id}/resume")
        assert resumed.status_code == 429
        assert (await task_state(store, task_id)).status == "failed"
