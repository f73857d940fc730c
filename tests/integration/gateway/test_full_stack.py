"""The API against a real stack: gateway + executor + nats-server, on the offline scripted
model. Create, follow, rewind and check the main path, wait for a human, stop, resume."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.integration.executor.scripts import write_script
from tests.integration.gateway.harness import RunningGateway, SseEvent, sse_events, user_message
from tests.support.stack import InProcessExecutor

FINAL = {"completed", "failed", "stopped"}
DEADLINE_S = 60


@pytest.fixture
async def executor(
    gateway: RunningGateway, nats_url: str, namespace: str, tmp_path: Path
) -> AsyncIterator[InProcessExecutor]:
    async with InProcessExecutor(
        nats_url, namespace, "exec-gateway-tests", settings={"working_root": tmp_path}
    ) as running:
        yield running


async def follow_until(
    client: httpx.AsyncClient,
    trace_id: str,
    done: Callable[[str, dict[str, Any]], bool],
    after: int = 0,
) -> list[SseEvent]:
    """Read the trace's stored events (SSE) from ``after`` until ``done(event, data)``."""
    seen: list[SseEvent] = []
    async with (
        asyncio.timeout(DEADLINE_S),
        client.stream(
            "GET", f"/api/traces/{trace_id}/events", headers={"Last-Event-ID": str(after)}
        ) as response,
    ):
        async for event in sse_events(response):
            if event.id is None:
                continue
            seen.append(event)
            if done(event.event, event.json()):
                return seen
    raise AssertionError("stream ended early")


def is_final(event: str, data: dict[str, Any]) -> bool:
    return event in FINAL


def waits_for_human(event: str, data: dict[str, Any]) -> bool:
    return event == "waiting" and data.get("reason") == "human"


async def main_path(client: httpx.AsyncClient, trace_id: str) -> list[dict[str, Any]]:
    response = await client.get(f"/api/traces/{trace_id}/messages?mode=main_path")
    return list(response.json()["messages"])


@pytest.mark.usefixtures("executor")
async def test_create_follow_complete(client: httpx.AsyncClient, gateway: RunningGateway) -> None:
    created = await client.post(
        "/api/traces",
        json={
            "messages": [user_message("list the files")],
            "model": "scripted:auto",
            "tools": ["glob"],
            "name": "files",
        },
    )
    trace_id = created.json()["trace_id"]
    events = await follow_until(client, trace_id, is_final)
    assert events[-1].event == "completed"
    kinds = [event.event for event in events]
    assert kinds[0] == "trace_created" and "message_appended" in kinds
    view = (await client.get(f"/api/traces/{trace_id}")).json()
    assert view["status"] == "completed"
    assert view["totals"]["prompt_tokens"] > 0
    path = await main_path(client, trace_id)
    assert path[0]["content"] == "list the files"
    assert any(call["function"]["name"] == "glob" for m in path for call in (m["tool_calls"] or []))
    assert path[-1]["role"] == "assistant" and path[-1]["content"]
    # every assistant message says how it ended; the answer ended normally
    ends = [m["finish_reason"] for m in path if m["role"] == "assistant"]
    assert ends[-1] == "stop" and set(ends[:-1]) == {"tool_calls"}, ends
    assert all(m["finish_reason"] is None for m in path if m["role"] != "assistant")
    async with asyncio.timeout(DEADLINE_S):  # the executor's index write reaches the listing
        await gateway.runtime.mirror.wait_until(
            lambda mirror: mirror.entries[trace_id].status == "completed"
        )
    listed = (await client.get("/api/traces?status=completed")).json()["traces"]
    assert [t["trace_id"] for t in listed] == [trace_id]


@pytest.mark.usefixtures("executor")
async def test_rewind_replaces_the_main_path(client: httpx.AsyncClient) -> None:
    created = await client.post(
        "/api/traces",
        json={"messages": [user_message("first")], "model": "scripted:auto", "tools": ["glob"]},
    )
    trace_id = created.json()["trace_id"]
    await follow_until(client, trace_id, is_final)
    first_path = await main_path(client, trace_id)
    assert len(first_path) >= 3
    rewind = await client.post(
        f"/api/traces/{trace_id}/run",
        json={"messages": [user_message("second")], "after_sequence": 1},
    )
    assert rewind.status_code == 202
    events = await follow_until(client, trace_id, is_final, after=rewind.json()["event_id"])
    assert events[-1].event == "completed"
    path = await main_path(client, trace_id)
    assert [m["content"] for m in path[:2]] == ["first", "second"]
    assert path[1]["parent_sequence"] == 1
    old_branch = {m["sequence"] for m in first_path[1:]}
    assert not old_branch & {m["sequence"] for m in path}
    everything = (await client.get(f"/api/traces/{trace_id}/messages?mode=all")).json()
    assert old_branch <= {m["sequence"] for m in everything["messages"]}


@pytest.mark.usefixtures("executor")
async def test_human_reply_stop_and_resume(client: httpx.AsyncClient) -> None:
    created = await client.post(
        "/api/traces",
        json={
            "messages": [user_message("ask me")],
            "model": "scripted:auto",
            "tools": ["ask_human"],
        },
    )
    trace_id = created.json()["trace_id"]
    await follow_until(client, trace_id, waits_for_human)
    reply = await client.post(f"/api/traces/{trace_id}/reply", json={"content": "blue"})
    assert reply.status_code == 202
    events = await follow_until(client, trace_id, is_final, after=reply.json()["event_id"])
    assert events[-1].event == "completed"
    assert any(
        m["role"] == "tool" and "blue" in str(m["content"])
        for m in await main_path(client, trace_id)
    )
    # A second trace is stopped while it waits, then resumed.
    waiting = (
        await client.post(
            "/api/traces",
            json={
                "messages": [user_message("ask again")],
                "model": "scripted:auto",
                "tools": ["ask_human"],
            },
        )
    ).json()["trace_id"]
    await follow_until(client, waiting, waits_for_human)
    stop = await client.post(f"/api/traces/{waiting}/stop")
    assert stop.status_code == 202
    stopped = await follow_until(client, waiting, is_final, after=stop.json()["event_id"])
    assert stopped[-1].event == "stopped"
    assert (await client.get(f"/api/traces/{waiting}")).json()["status"] == "stopped"
    resume = await client.post(f"/api/traces/{waiting}/resume")
    assert resume.status_code == 202
    resumed = await follow_until(
        client,
        waiting,
        lambda e, d: is_final(e, d) or waits_for_human(e, d),
        after=resume.json()["event_id"],
    )
    assert resumed[-1].event in ("completed", "waiting")
    assert (await client.get(f"/api/traces/{waiting}")).json()["status"] != "stopped"


@pytest.mark.usefixtures("executor")
async def test_dropped_stream_resumes_without_gap_or_duplicate(
    client: httpx.AsyncClient,
) -> None:
    created = await client.post(
        "/api/traces",
        json={
            "messages": [user_message("work")],
            "model": "scripted:auto",
            "tools": ["glob", "grep", "read"],
        },
    )
    trace_id = created.json()["trace_id"]
    ids: list[int] = []
    async with asyncio.timeout(DEADLINE_S):
        async with client.stream("GET", f"/api/traces/{trace_id}/events") as response:
            async for event in sse_events(response):
                if event.id is not None:
                    ids.append(int(event.id))
                if len(ids) == 3:
                    break  # the connection drops while the executor keeps going
        rest = await follow_until(client, trace_id, is_final, after=ids[-1])
    ids += [int(event.id or 0) for event in rest]
    async with (
        asyncio.timeout(DEADLINE_S),
        client.stream("GET", f"/api/traces/{trace_id}/events?follow=false") as response,
    ):
        stored = [int(e.id or 0) async for e in sse_events(response)]
    assert ids == stored
    assert rest[-1].event == "completed"


@pytest.mark.usefixtures("executor")
async def test_a_child_waiting_for_a_person_shows_on_its_parent_and_in_its_stream(
    client: httpx.AsyncClient, tmp_path: Path
) -> None:
    # Turn N answers a request holding N assistant messages: the child starts at 0 (asks),
    # the parent starts at 2 (delegates).
    model = write_script(
        tmp_path / "tree.yaml",
        [
            {"tool_calls": [{"name": "ask_human", "arguments": {"question": "which colour?"}}]},
            {"content": "child done"},
            {"tool_calls": [{"name": "agent", "arguments": {"task": "ask which colour"}}]},
            {"content": "parent done"},
        ],
    )
    history = [
        user_message("get ready"),
        {"role": "assistant", "content": "ready"},
        user_message("still ready?"),
        {"role": "assistant", "content": "yes"},
        user_message("find out the colour"),
    ]
    created = await client.post("/api/traces", json={"messages": history, "model": model})
    parent = created.json()["trace_id"]
    notices: list[dict[str, Any]] = []
    async with (
        asyncio.timeout(DEADLINE_S),
        client.stream("GET", f"/api/traces/{parent}/events") as response,
    ):
        async for event in sse_events(response):
            if event.event == "subtree":
                notices.append(event.json())
                if notices[-1]["waiting_below"]:
                    break
    [waiting] = notices[-1]["waiting_below"]
    assert waiting["reason"] == "human" and waiting["parent_trace_id"] == parent
    child = waiting["trace_id"]

    view = (await client.get(f"/api/traces/{parent}")).json()
    assert view["status"] == "waiting" and view["wait_reason"] == "subtraces"
    [sub] = view["sub_traces"]
    assert (sub["trace_id"], sub["status"], sub["wait_reason"]) == (child, "waiting", "human")
    assert [w["trace_id"] for w in view["waiting_below"]] == [child]
    [listed] = [
        t for t in (await client.get("/api/traces")).json()["traces"] if t["trace_id"] == parent
    ]
    assert [w["trace_id"] for w in listed["waiting_below"]] == [child]

    reply = await client.post(f"/api/traces/{child}/reply", json={"content": "blue"})
    assert reply.status_code == 202
    events = await follow_until(client, parent, is_final)
    assert events[-1].event == "completed"
    done = (await client.get(f"/api/traces/{parent}")).json()
    assert done["waiting_below"] == [] and done["sub_traces"][0]["status"] == "completed"


@pytest.mark.usefixtures("executor")
async def test_the_context_the_model_saw_is_recorded_and_served(client: httpx.AsyncClient) -> None:
    created = await client.post(
        "/api/traces",
        json={"messages": [user_message("list files")], "tools": ["glob", "read"]},
    )
    trace_id = created.json()["trace_id"]
    await follow_until(client, trace_id, is_final)
    view = (await client.get(f"/api/traces/{trace_id}")).json()
    summary = view["context"]
    assert summary["preset"] == "default" and sorted(summary["tools"]) == ["glob", "read"]
    full = (await client.get(f"/api/traces/{trace_id}/context")).json()
    assert full["hash"] == summary["hash"]
    assert "Working directory:" in full["system_prompt"]
    schemas = {tool["name"]: tool["parameters"] for tool in full["tools"]}
    assert set(schemas) == {"glob", "read"} and schemas["read"]["type"] == "object"


@pytest.mark.usefixtures("executor")
async def test_a_budget_stop_shows_what_the_run_used(
    client: httpx.AsyncClient, tmp_path: Path
) -> None:
    glob = {"name": "glob", "arguments": {"pattern": "*"}, "id": "g"}
    model = write_script(
        tmp_path / "globs.yaml",
        [
            {"tool_calls": [{**glob, "id": f"g{n}"}], "usage": {"prompt_tokens": 10}}
            for n in range(5)
        ],
    )
    created = await client.post(
        "/api/traces",
        json={"messages": [user_message("look")], "model": model, "max_iterations": 2},
    )
    trace_id = created.json()["trace_id"]
    events = await follow_until(client, trace_id, is_final)
    assert events[-1].event == "stopped"
    stopped = events[-1].json()
    assert stopped["reason"] == "max_iterations"
    assert (stopped["used"]["iterations"], stopped["used"]["tokens"]) == (2, 20)
    view = (await client.get(f"/api/traces/{trace_id}")).json()
    assert view["stop_reason"] == "max_iterations"
    assert view["run_usage"] == {"iterations": 2, "tokens": 20, "cost": 0.0}
    assert view["budget"] == {"max_iterations": 2, "max_tokens": None, "max_cost": None}


@pytest.mark.usefixtures("executor")
async def test_client_tools_are_handed_to_the_client_and_its_results_used(
    client: httpx.AsyncClient, tmp_path: Path
) -> None:
    model = write_script(
        tmp_path / "client.yaml",
        [
            {"tool_calls": [{"id": "c_1", "name": "glob", "arguments": {"pattern": "*.md"}}]},
            {"content": "you have one file"},
        ],
    )
    body = {
        "messages": [user_message("what is in my folder?")],
        "model": model,
        "auto_execute_tools": False,
    }
    trace_id = (await client.post("/api/traces", json=body)).json()["trace_id"]
    await follow_until(client, trace_id, lambda e, d: e == "waiting")
    view = (await client.get(f"/api/traces/{trace_id}")).json()
    assert view["wait_reason"] == "client_tools"
    assert [(p["tool_call_id"], p["name"]) for p in view["pending_client_calls"]] == [
        ("c_1", "glob")
    ]
    wrong = await client.post(
        f"/api/traces/{trace_id}/tool_results",
        json={"results": [{"tool_call_id": "c_9", "content": "x"}]},
    )
    assert wrong.status_code == 409
    posted = await client.post(
        f"/api/traces/{trace_id}/tool_results",
        json={"results": [{"tool_call_id": "c_1", "content": "README.md (on the client)"}]},
    )
    assert posted.status_code == 202
    events = await follow_until(client, trace_id, is_final, after=posted.json()["event_id"])
    assert events[-1].event == "completed"
    [result] = [m for m in await main_path(client, trace_id) if m["role"] == "tool"]
    assert result["content"] == "README.md (on the client)"
