"""The task API: the gateway appends ``task_created`` / ``resume_requested`` and folds
``TaskState``; the planner's events show up in the view."""

from __future__ import annotations

import httpx
from longhaul.core.store import EventStore, Position
from longhaul.domain import events as ev
from longhaul.domain.ids import new_id

from tests.support.folds import task_state


async def planner_appends(store: EventStore, task_id: str, *events: ev.TaskEvent) -> None:
    state = await task_state(store, task_id)
    await store.append(
        "task",
        task_id,
        list(events),
        expected=Position(state.stream_seq, state.version),
        actor="planner:test",
    )


async def test_create_task_appends_task_created(
    client: httpx.AsyncClient, store: EventStore
) -> None:
    response = await client.post(
        "/api/tasks",
        json={"goal": "compare three databases", "mode": "plan", "options": {"max_phases": 3}},
    )
    assert response.status_code == 202
    body = response.json()
    assert body["status"] == "planning" and body["task_id"].startswith("task_")
    assert response.headers["location"] == f"/api/tasks/{body['task_id']}"
    [created] = [r.event async for r in store.replay("task", body["task_id"])]
    assert isinstance(created, ev.TaskCreated)
    assert created.goal == "compare three databases" and created.owner == "local"
    assert created.options == {"max_phases": 3}


async def test_task_view_follows_the_plan(client: httpx.AsyncClient, store: EventStore) -> None:
    task_id = (await client.post("/api/v1/tasks", json={"goal": "g"})).json()["task_id"]
    await planner_appends(
        store,
        task_id,
        ev.PlanCreated(
            phases=[
                ev.PhaseSpec(id="a", name="gather"),
                ev.PhaseSpec(id="b", name="write", depends_on=["a"]),
            ]
        ),
        ev.PhaseStarted(phase_id="a", trace_ids=["t_1"]),
        ev.PhaseCompleted(phase_id="a", summary="found 3", output_ref="ws:task/a"),
    )
    view = (await client.get(f"/api/tasks/{task_id}")).json()
    assert view["status"] == "running" and view["goal"] == "g"
    assert [(p["id"], p["status"], p["depends_on"]) for p in view["phases"]] == [
        ("a", "completed", []),
        ("b", "pending", ["a"]),
    ]
    assert view["phases"][0]["trace_ids"] == ["t_1"]
    assert view["phases"][0]["summary"] == "found 3"
    assert view["phases"][0]["output_ref"] == "ws:task/a"
    assert view == (await client.get(f"/api/v1/tasks/{task_id}")).json()


async def test_resume_is_checked_against_the_fold(
    client: httpx.AsyncClient, store: EventStore
) -> None:
    task_id = (await client.post("/api/tasks", json={"goal": "g"})).json()["task_id"]
    await planner_appends(
        store,
        task_id,
        ev.PlanCreated(phases=[ev.PhaseSpec(id="a", name="only")]),
        ev.TaskFailed(error="phase a failed twice"),
    )
    resumed = await client.post(f"/api/tasks/{task_id}/resume")
    assert resumed.status_code == 202 and resumed.json()["status"] == "running"
    assert isinstance(
        [r.event async for r in store.replay("task", task_id)][-1], ev.ResumeRequested
    )
    view = (await client.get(f"/api/tasks/{task_id}")).json()
    assert (view["resumes"], view["resumes_handled"], view["resume_source"]) == (1, 0, "")
    await planner_appends(store, task_id, ev.Resumed(source="checkpoint", resumed_at=["a"]))
    view = (await client.get(f"/api/tasks/{task_id}")).json()
    assert (view["resumes"], view["resumes_handled"], view["resume_source"]) == (1, 1, "checkpoint")
    await planner_appends(
        store,
        task_id,
        ev.PhaseStarted(phase_id="a"),
        ev.PhaseCompleted(phase_id="a"),
        ev.TaskCompleted(),
    )
    refused = await client.post(f"/api/v1/tasks/{task_id}/resume")
    assert refused.status_code == 409 and refused.json()["error"]["code"] == "conflict"


async def test_task_input_is_validated(client: httpx.AsyncClient) -> None:
    for body in (
        {},
        {"goal": ""},
        {"goal": "g", "mode": "Bad Mode"},
        {"goal": "g", "mode": "team"},
        {"goal": 3},
        {"goal": "g", "extra": 1},
    ):
        response = await client.post("/api/tasks", json=body)
        assert response.status_code == 422, body
        assert response.json()["error"]["code"] == "invalid_request"


async def test_a_competitive_phase_shows_how_its_result_was_chosen(
    client: httpx.AsyncClient, store: EventStore
) -> None:
    task_id = (await client.post("/api/tasks", json={"goal": "g"})).json()["task_id"]
    record = ev.MergeRecord(
        strategy="vote",
        method="vote",
        candidates=[
            ev.MergeCandidate(label="alpha", trace_id="t_a", status="completed", score=8),
            ev.MergeCandidate(label="beta", trace_id="t_b", status="completed", score=17),
            ev.MergeCandidate(label="gamma", trace_id="t_c", status="failed"),
        ],
        winner="t_b",
        reason="vote: beta won (alpha=8, beta=17; 2 ballots)",
    )
    await planner_appends(
        store,
        task_id,
        ev.PlanCreated(
            phases=[
                ev.PhaseSpec(
                    id="race",
                    name="race",
                    merge="vote",
                    competitors=[{"label": "alpha"}, {"label": "beta"}, {"label": "gamma"}],
                )
            ]
        ),
        ev.PhaseStarted(phase_id="race", trace_ids=["t_a", "t_b", "t_c"]),
        ev.PhaseCompleted(phase_id="race", trace_id="t_b", merge=record),
    )
    [phase] = (await client.get(f"/api/tasks/{task_id}")).json()["phases"]
    assert phase["merge"] == {
        "strategy": "vote",
        "method": "vote",
        "candidates": [
            {"label": "alpha", "trace_id": "t_a", "status": "completed", "score": 8.0},
            {"label": "beta", "trace_id": "t_b", "status": "completed", "score": 17.0},
            {"label": "gamma", "trace_id": "t_c", "status": "failed", "score": None},
        ],
        "winner": "t_b",
        "reason": "vote: beta won (alpha=8, beta=17; 2 ballots)",
    }
    # the plan's side: how many competitors and which strategy, before any result
    assert (phase["competitors"], phase["merge_strategy"]) == (3, "vote")


async def test_task_list_is_the_callers_newest_first_with_paging(
    client: httpx.AsyncClient, store: EventStore
) -> None:
    foreign = new_id("task")
    await store.append(
        "task", foreign, [ev.TaskCreated(goal="not yours", owner="k_other")], expected=Position()
    )
    ids = [
        (await client.post("/api/tasks", json={"goal": f"goal {n}"})).json()["task_id"]
        for n in range(3)
    ]
    await planner_appends(
        store,
        ids[0],
        ev.PlanCreated(phases=[ev.PhaseSpec(id="a", name="a"), ev.PhaseSpec(id="b", name="b")]),
        ev.PhaseStarted(phase_id="a"),
        ev.PhaseCompleted(phase_id="a"),
    )
    listed = (await client.get("/api/tasks")).json()
    assert [t["task_id"] for t in listed["tasks"]] == ids[::-1]
    assert listed["next_cursor"] is None
    oldest = listed["tasks"][-1]
    assert (oldest["goal"], oldest["status"], oldest["phases"], oldest["phases_completed"]) == (
        "goal 0",
        "running",
        2,
        1,
    )
    first = (await client.get("/api/v1/tasks?limit=2")).json()
    rest = (await client.get(f"/api/tasks?limit=2&cursor={first['next_cursor']}")).json()
    assert [t["task_id"] for t in first["tasks"] + rest["tasks"]] == ids[::-1]
    assert rest["next_cursor"] is None
    assert foreign not in {t["task_id"] for t in listed["tasks"]}
