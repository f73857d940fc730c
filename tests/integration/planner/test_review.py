"""Plan review through the real stack: a task asked to be reviewed waits in
``awaiting_review`` with its proposed phases and starts nothing; ``POST /api/tasks/{id}/plan``
approves it, approves an edited plan (checked like a model's, 422 otherwise, nothing
appended) or refuses it. The wait is on the log, so a planner killed during review and
started again carries on from the answer."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from longhaul.core.connection import Connection
from longhaul.core.store import EventStore
from longhaul.domain import events as ev

from tests.integration.cli.harness import longhaul
from tests.integration.gateway.harness import RunningGateway, serve_gateway
from tests.integration.planner.conftest import ConfigFactory
from tests.integration.planner.support import (
    PlannerProcess,
    StepCompleter,
    planner_service,
    task_events,
    temp_dir,
    wait_task,
)
from tests.support.folds import task_state

GOAL = "Compare Feishu and DingTalk and write a report"


@pytest.fixture
async def gateway(make_config: ConfigFactory) -> AsyncIterator[RunningGateway]:
    async with serve_gateway(make_config(), heartbeat_s=0.3) as running:
        yield running


@pytest.fixture
async def client(gateway: RunningGateway) -> AsyncIterator[httpx.AsyncClient]:
    async with gateway.client() as http:
        yield http


def awaiting(task: Any) -> bool:
    return task.status == "awaiting_review"


def edited(pid: str, *deps: str) -> dict[str, Any]:
    return {
        "id": pid,
        "name": f"Edited {pid}",
        "description": f"carry out the edited step {pid} in full",
        "depends_on": list(deps),
        "preset": "default",
        "criteria": [f"{pid} is done"],
    }


async def create(client: httpx.AsyncClient, **body: Any) -> str:
    response = await client.post("/api/tasks", json={"goal": GOAL, **body})
    assert response.status_code == 202, response.text
    return str(response.json()["task_id"])


async def test_a_reviewed_plan_survives_a_planner_restart_and_runs_as_edited(
    conn: Connection, store: EventStore, make_config: ConfigFactory, client: httpx.AsyncClient
) -> None:
    config = make_config()
    completer = StepCompleter(conn, store)
    with temp_dir() as logs:
        async with completer:
            first = await PlannerProcess(config, logs).start()
            try:
                task_id = await create(client, review=True)
                await wait_task(store, task_id, awaiting, within=30)
            finally:
                await first.kill()  # SIGKILL while the plan waits for review

            view = (await client.get(f"/api/tasks/{task_id}")).json()
            assert view["status"] == "awaiting_review" and view["plan_source"] == "rules"
            assert [p["id"] for p in view["phases"]] == [
                "gather-1",
                "gather-2",
                "compare",
                "write",
            ]
            assert all(p["status"] == "pending" and not p["trace_ids"] for p in view["phases"])
            assert view["phases"][0]["preset"] == "explore" and view["phases"][0]["criteria"]
            assert completer.seen == {}  # nothing ran before approval

            before = len(await task_events(store, task_id))
            cycle = await client.post(
                f"/api/tasks/{task_id}/plan",
                json={"approved": True, "phases": [edited("a", "b"), edited("b", "a")]},
            )
            assert cycle.status_code == 422 and cycle.json()["error"]["code"] == "invalid_plan"
            assert "cycle" in cycle.json()["error"]["message"]
            lazy = {**edited("a"), "criteria": [], "description": "do it"}
            weak = await client.post(
                f"/api/tasks/{task_id}/plan", json={"approved": True, "phases": [lazy]}
            )
            assert weak.status_code == 422 and weak.json()["error"]["code"] == "invalid_plan"
            assert "acceptance criterion" in weak.json()["error"]["message"]
            unknown = await client.post(
                f"/api/tasks/{task_id}/plan",
                json={"approved": True, "phases": [{**edited("a"), "preset": "wizard"}]},
            )
            assert unknown.status_code == 422 and "wizard" in unknown.json()["error"]["message"]
            assert len(await task_events(store, task_id)) == before  # refused: nothing appended

            approved = await client.post(
                f"/api/tasks/{task_id}/plan",
                json={
                    "approved": True,
                    "phases": [edited("a"), edited("b", "a")],
                    "reason": "two steps are enough",
                },
            )
            assert approved.status_code == 202 and approved.json()["status"] == "running"
            again = await client.post(f"/api/tasks/{task_id}/plan", json={"approved": True})
            assert again.status_code == 409

            async with PlannerProcess(config, logs) as second:
                try:
                    task = await wait_task(store, task_id, within=60)
                except TimeoutError:
                    raise AssertionError(second.log_tail()) from None
    assert task.status == "completed" and task.plan_source == "review"
    assert task.order == ["a", "b"] and task.review_reason == "two steps are enough"
    assert set(completer.seen) == {"a", "b"}
    reviewed = [e for e in await task_events(store, task_id) if isinstance(e, ev.PlanReviewed)]
    assert len(reviewed) == 1 and reviewed[0].approved


async def test_approving_as_proposed_runs_the_proposed_plan(
    conn: Connection, store: EventStore, make_config: ConfigFactory, client: httpx.AsyncClient
) -> None:
    async with StepCompleter(conn, store) as completer, planner_service(make_config()):
        task_id = await create(client, review=True)
        proposed = await wait_task(store, task_id, awaiting)
        response = await client.post(f"/api/tasks/{task_id}/plan", json={"approved": True})
        assert response.status_code == 202
        task = await wait_task(store, task_id)
    assert task.status == "completed" and task.order == proposed.order
    assert set(completer.seen) == set(proposed.order)


async def test_a_refused_plan_cancels_the_task(
    conn: Connection, store: EventStore, make_config: ConfigFactory, client: httpx.AsyncClient
) -> None:
    async with StepCompleter(conn, store) as completer, planner_service(make_config()):
        task_id = await create(client, review=True)
        await wait_task(store, task_id, awaiting)
        with_phases = await client.post(
            f"/api/tasks/{task_id}/plan", json={"approved": False, "phases": [edited("a")]}
        )
        assert with_phases.status_code == 422
        refused = await client.post(
            f"/api/tasks/{task_id}/plan", json={"approved": False, "reason": "too costly"}
        )
        assert refused.status_code == 202 and refused.json()["status"] == "cancelled"
    view = (await client.get(f"/api/tasks/{task_id}")).json()
    assert view["status"] == "cancelled" and view["error"] == "plan refused: too costly"
    assert completer.seen == {}
    assert (await client.post(f"/api/tasks/{task_id}/resume")).status_code == 409
    assert (
        await client.post(f"/api/tasks/{task_id}/plan", json={"approved": True})
    ).status_code == 409


async def test_review_follows_the_configured_default_and_a_task_may_opt_out(
    conn: Connection, store: EventStore, make_config: ConfigFactory, client: httpx.AsyncClient
) -> None:
    async with StepCompleter(conn, store), planner_service(make_config(plan_review=True)):
        reviewed = await create(client)
        await wait_task(store, reviewed, awaiting)
        direct = await create(client, review=False)
        assert (await wait_task(store, direct)).status == "completed"
    assert (await task_state(store, reviewed)).status == "awaiting_review"


async def test_a_plan_not_waiting_for_review_cannot_be_reviewed(
    conn: Connection, store: EventStore, make_config: ConfigFactory, client: httpx.AsyncClient
) -> None:
    async with StepCompleter(conn, store), planner_service(make_config()):
        task_id = await create(client)
        await wait_task(store, task_id)
    response = await client.post(f"/api/tasks/{task_id}/plan", json={"approved": True})
    assert response.status_code == 409
    missing = await client.post("/api/tasks/task_nope/plan", json={"approved": True})
    assert missing.status_code == 404


async def test_the_cli_shows_a_plan_for_review_and_answers_it(
    conn: Connection,
    store: EventStore,
    make_config: ConfigFactory,
    gateway: RunningGateway,
    client: httpx.AsyncClient,
    tmp_path: Path,
) -> None:
    async with StepCompleter(conn, store), planner_service(make_config()):
        task_id = await create(client, review=True)
        await wait_task(store, task_id, awaiting)
        shown = await longhaul("tasks", "show", task_id, url=gateway.url)
        assert shown.code == 0, shown.output
        assert "awaiting_review" in shown.stdout and "Gather: Feishu" in shown.stdout
        assert f"longhaul tasks plan {task_id} --approve" in shown.stdout

        bad = tmp_path / "bad.json"
        bad.write_text(json.dumps([edited("a", "a")]))
        refused = await longhaul("tasks", "plan", task_id, "--edit", str(bad), url=gateway.url)
        assert refused.code == 1 and "422 invalid_plan" in refused.stderr
        both = await longhaul(
            "tasks", "plan", task_id, "--approve", "--refuse", "x", url=gateway.url
        )
        assert both.code == 2 and "exactly one" in both.stderr

        good = tmp_path / "good.json"
        good.write_text(json.dumps({"phases": [edited("only")]}))
        answered = await longhaul("tasks", "plan", task_id, "--edit", str(good), url=gateway.url)
        assert answered.code == 0 and "running" in answered.stdout, answered.output
        task = await wait_task(store, task_id)
    assert task.status == "completed" and task.order == ["only"]


async def test_longhaul_run_routes_a_comparison_to_a_team_and_follows_it(
    conn: Connection,
    store: EventStore,
    make_config: ConfigFactory,
    gateway: RunningGateway,
) -> None:
    async with StepCompleter(conn, store), planner_service(make_config()):
        team = await longhaul("run", "分析飞书和钉钉的竞品对比", url=gateway.url)
        assert team.code == 0, team.output
        assert "route: team" in team.stdout and "task_completed" in team.stdout
        assert "phase_completed gather-1" in team.stdout
        reviewed = await longhaul("run", GOAL, "--review", url=gateway.url)
        assert reviewed.code == 0, reviewed.output
        assert "waiting for review" in reviewed.stdout and "Gather: DingTalk" in reviewed.stdout
