"""A task's checkpoints listed and cleared over HTTP, and its own ``max_tokens`` /
``max_cost`` caps over the sum of its step traces, through the gateway and a planner."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from longhaul.core.connection import Connection
from longhaul.core.store import EventStore
from longhaul.domain import events as ev

from tests.integration.cli.harness import cli_env, longhaul
from tests.integration.gateway.harness import RunningGateway, gateway_config, serve_gateway
from tests.integration.planner.conftest import ConfigFactory
from tests.integration.planner.support import (
    Outcome,
    RunUntilStopped,
    StepCompleter,
    Succeed,
    chain,
    failing,
    phase,
    planner_service,
    task_events,
    wait_task,
)

ALICE, BOB = "alice-key-0123456789", "bob-key-0123456789"


@pytest.fixture
async def gateway(make_config: ConfigFactory) -> AsyncIterator[RunningGateway]:
    config = make_config()
    config.gateway = gateway_config(config.nats, api_keys=f"{ALICE},{BOB}").gateway
    async with serve_gateway(config, heartbeat_s=0.3) as running:
        yield running


@pytest.fixture
async def alice(gateway: RunningGateway) -> AsyncIterator[httpx.AsyncClient]:
    async with gateway.client(ALICE) as http:
        yield http


async def create(http: httpx.AsyncClient, phases: list[dict[str, Any]], **body: Any) -> str:
    response = await http.post(
        "/api/tasks", json={"goal": "g", "options": {"phases": phases}, **body}
    )
    assert response.status_code == 202, response.text
    return str(response.json()["task_id"])


async def test_checkpoints_are_listed_and_cleared_and_a_resume_then_reads_the_log(
    conn: Connection,
    store: EventStore,
    make_config: ConfigFactory,
    gateway: RunningGateway,
    alice: httpx.AsyncClient,
) -> None:
    config = make_config(max_replan_attempts=0, single_agent_fallback=False)
    completer = StepCompleter(conn, store, failing("p3", times=1))
    async with completer, planner_service(config):
        task_id = await create(alice, chain(3))
        assert (await wait_task(store, task_id)).status == "failed"
        as_alice = cli_env(LONGHAUL_API_KEY=ALICE)
        shown = await longhaul("tasks", "checkpoints", task_id, url=gateway.url, env=as_alice)
        assert shown.code == 0 and "p2  Phase p2  output of p2" in shown.stdout, shown.output
        listed = (await alice.get(f"/api/tasks/{task_id}/checkpoints")).json()["checkpoints"]
        assert [(c["phase_id"], c["name"]) for c in listed] == [
            ("p1", "Phase p1"),
            ("p2", "Phase p2"),
        ]
        assert listed[0]["summary"] == "output of p1" and listed[0]["trace_id"]
        async with gateway.client(BOB) as bob:
            assert (await bob.get(f"/api/tasks/{task_id}/checkpoints")).status_code == 404
            assert (await bob.delete(f"/api/tasks/{task_id}/checkpoints")).status_code == 404
        assert (
            len((await alice.get(f"/api/tasks/{task_id}/checkpoints")).json()["checkpoints"]) == 2
        )

        cleared = await alice.delete(f"/api/tasks/{task_id}/checkpoints")
        assert cleared.status_code == 200 and cleared.json() == {"task_id": task_id, "cleared": 2}
        by_cli = await longhaul(
            "tasks", "checkpoints", task_id, "--clear", url=gateway.url, env=as_alice
        )
        assert by_cli.code == 0 and "cleared 0 checkpoints" in by_cli.stdout, by_cli.output
        assert (await alice.get(f"/api/tasks/{task_id}/checkpoints")).json() == {"checkpoints": []}
        assert (await alice.delete(f"/api/tasks/{task_id}/checkpoints")).json()["cleared"] == 0

        shown = await longhaul("tasks", "checkpoints", task_id, url=gateway.url, env=as_alice)
        assert shown.code == 0 and "no checkpoints" in shown.stdout, shown.output

        assert (await alice.post(f"/api/tasks/{task_id}/resume")).status_code == 202
        task = await wait_task(store, task_id, lambda t: t.status == "completed")
    assert task.resume_source == "event_log"
    assert len(completer.trace_ids("p1")) == 1 and len(completer.trace_ids("p3")) == 2
    missing = await alice.get("/api/tasks/task_nope/checkpoints")
    assert missing.status_code == 404


async def test_a_task_over_its_token_cap_fails_and_its_running_phase_is_stopped(
    conn: Connection, store: EventStore, make_config: ConfigFactory, alice: httpx.AsyncClient
) -> None:
    async def policy(created: ev.TraceCreated, _n: int) -> Outcome:
        if created.phase_id == "slow":
            return RunUntilStopped(tokens=50)
        return Succeed("quick answer", tokens=600)

    phases = [phase("quick"), phase("slow"), phase("after", "quick", "slow")]
    completer = StepCompleter(conn, store, policy)
    async with completer, planner_service(make_config()):
        task_id = await create(alice, phases, max_tokens=500)
        task = await wait_task(store, task_id)
        [slow_trace] = completer.trace_ids("slow")
    assert task.status == "failed"
    assert task.error == "task max_tokens exceeded: its step traces used 600 of 500"
    assert task.max_tokens == 500 and "after" not in completer.seen  # nothing more started
    assert [c.config.max_tokens for c in completer.seen["quick"]] == [500]
    stops = [r.event async for r in store.replay("trace", slow_trace)]
    assert any(isinstance(e, ev.StopRequested) and e.reason == "task_budget" for e in stops)
    view = (await alice.get(f"/api/tasks/{task_id}")).json()
    assert view["max_tokens"] == 500 and view["error"] == task.error


async def test_phases_get_what_is_left_of_the_cap_and_a_task_within_it_completes(
    conn: Connection, store: EventStore, make_config: ConfigFactory, alice: httpx.AsyncClient
) -> None:
    async def policy(created: ev.TraceCreated, _n: int) -> Outcome:
        return Succeed(f"output of {created.phase_id}", tokens=200)

    completer = StepCompleter(conn, store, policy)
    async with completer, planner_service(make_config()):
        task_id = await create(alice, chain(2), max_tokens=1000, max_cost=5.0)
        task = await wait_task(store, task_id)
    assert task.status == "completed"
    assert [c.config.max_tokens for c in completer.seen["p1"]] == [1000]
    assert [c.config.max_tokens for c in completer.seen["p2"]] == [800]
    assert completer.seen["p2"][0].config.max_cost == 5.0
    assert len([e for e in await task_events(store, task_id) if isinstance(e, ev.TaskFailed)]) == 0
