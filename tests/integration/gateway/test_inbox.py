"""Messages for running traces through the real stack (gateway + executor + nats-server):
the inbox and the a2a webhook with the owner's key, a wait on a person left alone by a plain
message and broken by ``wake: true``, ``check_messages`` reading both; a child telling its
parent something with ``send_message``; step traces of one task messaging each other
(siblings through the task's fold); collaborators on GET; the refusals (another key's or
an unknown trace 404, an ended trace or one without ``messaging`` 409, a bad body 422)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from longhaul.core.config import NatsConfig
from longhaul.core.repository import traces
from longhaul.core.store import EventStore
from longhaul.domain import events as ev
from longhaul.planner.steps import ensure_step_trace, step_trace_created, step_trace_id

from tests.integration.executor.scripts import write_script
from tests.integration.gateway.harness import (
    RunningGateway,
    gateway_config,
    serve_gateway,
    user_message,
)
from tests.integration.gateway.test_full_stack import (
    follow_until,
    is_final,
    main_path,
    waits_for_human,
)
from tests.integration.gateway.test_tasks_api import planner_appends
from tests.support.folds import task_state
from tests.support.stack import InProcessExecutor

KEY_A, KEY_B = "key-a-inbox-0123456789", "key-b-inbox-9876543210"


@pytest.fixture
async def gateway(nats_config: NatsConfig) -> AsyncIterator[RunningGateway]:
    async with serve_gateway(gateway_config(nats_config, api_keys=f"{KEY_A},{KEY_B}")) as gw:
        yield gw


@pytest.fixture
async def executor(
    gateway: RunningGateway, nats_url: str, namespace: str, tmp_path: Path
) -> AsyncIterator[InProcessExecutor]:
    async with InProcessExecutor(
        nats_url, namespace, "exec-inbox", settings={"working_root": tmp_path}
    ) as running:
        yield running


@pytest.fixture
async def alice(gateway: RunningGateway) -> AsyncIterator[httpx.AsyncClient]:
    async with gateway.client(KEY_A) as http:
        yield http


@pytest.fixture
async def mallory(gateway: RunningGateway) -> AsyncIterator[httpx.AsyncClient]:
    async with gateway.client(KEY_B) as http:
        yield http


def tool_results(path: list[dict[str, Any]]) -> dict[str, str]:
    return {
        str(m["name"] or m["tool_call_id"]): str(m["content"]) for m in path if m["role"] == "tool"
    }


@pytest.mark.usefixtures("executor")
async def test_inbox_webhook_wake_and_check_messages(
    alice: httpx.AsyncClient, mallory: httpx.AsyncClient, tmp_path: Path
) -> None:
    model = write_script(
        tmp_path / "inbox.yaml",
        [
            {"tool_calls": [{"name": "ask_human", "arguments": {"question": "deploy?"}}]},
            {"tool_calls": [{"name": "check_messages", "arguments": {}}]},
            {"content": "deployed"},
        ],
    )
    created = await alice.post(
        "/api/traces",
        json={"messages": [user_message("deploy")], "model": model, "messaging": True},
    )
    trace_id = created.json()["trace_id"]
    await follow_until(alice, trace_id, waits_for_human)

    plain = await alice.post(
        f"/api/traces/{trace_id}/inbox", json={"from": "ops", "content": "staging is down"}
    )
    assert plain.status_code == 202 and plain.json()["message_id"].startswith("msg_")
    view = (await alice.get(f"/api/traces/{trace_id}")).json()
    assert view["status"] == "waiting" and view["wait_reason"] == "human"
    assert view["unread_messages"] == 1 and view["messaging"] is True
    assert {"name": "human", "type": "human"}.items() <= view["collaborators"][0].items()

    # Another key can neither post to it nor learn that it exists.
    for path, body in (
        (f"/api/traces/{trace_id}/inbox", {"from": "x", "content": "hi"}),
        ("/webhook/a2a-messages", {"trace_id": trace_id, "from": "x", "content": "hi"}),
    ):
        refused = await mallory.post(path, json=body)
        assert refused.status_code == 404 and refused.json()["error"]["code"] == "not_found"
    missing = await alice.post("/api/traces/t_nope/inbox", json={"from": "x", "content": "hi"})
    assert missing.status_code == 404
    bad = await alice.post(f"/api/traces/{trace_id}/inbox", json={"content": "no sender"})
    assert bad.status_code == 422

    woke = await alice.post(
        "/webhook/a2a-messages",
        json={"trace_id": trace_id, "from": "ci", "content": "build green", "wake": True},
    )
    assert woke.status_code == 202
    events = await follow_until(alice, trace_id, is_final, after=woke.json()["event_id"])
    assert events[-1].event == "completed"
    results = tool_results(await main_path(alice, trace_id))
    assert results["ask_human"].startswith("No reply yet. 2 new message(s)")
    assert "From ops:\nstaging is down" in results["check_messages"]
    assert "From ci:\nbuild green" in results["check_messages"]
    view = (await alice.get(f"/api/traces/{trace_id}")).json()
    assert view["unread_messages"] == 0

    ended = await alice.post(f"/api/traces/{trace_id}/inbox", json={"from": "x", "content": "late"})
    assert ended.status_code == 409


@pytest.mark.usefixtures("executor")
async def test_a_trace_without_messaging_refuses_messages(alice: httpx.AsyncClient) -> None:
    created = await alice.post(
        "/api/traces",
        json={"messages": [user_message("ask")], "model": "scripted:auto", "tools": ["ask_human"]},
    )
    trace_id = created.json()["trace_id"]
    await follow_until(alice, trace_id, waits_for_human)
    refused = await alice.post(f"/api/traces/{trace_id}/inbox", json={"from": "x", "content": "hi"})
    assert refused.status_code == 409 and refused.json()["error"]["code"] == "messaging_off"
    view = (await alice.get(f"/api/traces/{trace_id}")).json()
    assert "check_messages" not in view["context"]["tools"]


@pytest.mark.usefixtures("executor")
async def test_a_child_messages_its_parent(alice: httpx.AsyncClient, tmp_path: Path) -> None:
    # Turn N answers a request holding N assistant messages: the child starts at 0, the
    # parent (two answers in its history) at 2.
    model = write_script(
        tmp_path / "family.yaml",
        [
            {
                "tool_calls": [
                    {"name": "send_message", "arguments": {"to": "parent", "content": "half"}},
                    {"name": "send_message", "arguments": {"to": "t_stranger", "content": "x"}},
                ]
            },
            {"content": "child done"},
            {"tool_calls": [{"name": "agent", "arguments": {"task": "do half"}}]},
            {"tool_calls": [{"name": "check_messages", "arguments": {}}]},
            {"content": "parent done"},
        ],
    )
    history = [
        user_message("a"),
        {"role": "assistant", "content": "b"},
        user_message("c"),
        {"role": "assistant", "content": "d"},
        user_message("split the work"),
    ]
    created = await alice.post(
        "/api/traces", json={"messages": history, "model": model, "messaging": True}
    )
    parent = created.json()["trace_id"]
    events = await follow_until(alice, parent, is_final)
    assert events[-1].event == "completed"
    [child] = (await alice.get(f"/api/traces/{parent}")).json()["sub_traces"]
    child_id = child["trace_id"]
    child_path = await main_path(alice, child_id)
    outputs = [str(m["content"]) for m in child_path if m["role"] == "tool"]
    assert outputs[0] == f"Delivered to {parent}."
    assert "'t_stranger' is not an agent you work with" in outputs[1]
    parent_results = tool_results(await main_path(alice, parent))
    assert f"From sub-agent {child_id}:\nhalf" in parent_results["check_messages"]
    child_view = (await alice.get(f"/api/traces/{child_id}")).json()
    assert child_view["messaging"] is True
    assert [(c["name"], c["trace_id"]) for c in child_view["collaborators"]] == [("parent", parent)]
    parent_view = (await alice.get(f"/api/traces/{parent}")).json()
    assert [(c["name"], c["status"]) for c in parent_view["collaborators"]] == [
        (child_id, "completed")
    ]


@pytest.mark.usefixtures("executor")
async def test_step_traces_of_one_task_message_each_other(
    alice: httpx.AsyncClient, mallory: httpx.AsyncClient, store: EventStore, tmp_path: Path
) -> None:
    """Phase b's step trace waits on a person; phase a's messages it by trace id (a sibling
    through the task), and b reads it once answered. The planner's part (plan, phases
    started, step traces created with its own code) is appended directly."""
    created = await alice.post(
        "/api/tasks", json={"goal": "two phases", "options": {"messaging": True}}
    )
    task_id = created.json()["task_id"]
    step = {pid: step_trace_id(task_id, 0, pid, 1, 0) for pid in ("a", "b")}
    send = {"name": "send_message", "arguments": {"to": step["b"], "content": "3 found"}}
    writer = write_script(tmp_path / "a.yaml", [{"tool_calls": [send]}, {"content": "a done"}])
    reader = write_script(
        tmp_path / "b.yaml",
        [
            {"tool_calls": [{"name": "ask_human", "arguments": {"question": "go?"}}]},
            {"tool_calls": [{"name": "check_messages", "arguments": {}}]},
            {"content": "b done"},
        ],
    )
    phases = {
        "a": ev.PhaseSpec(id="a", name="gather", model=writer),
        "b": ev.PhaseSpec(id="b", name="write", model=reader),
    }
    await planner_appends(
        store,
        task_id,
        ev.PlanCreated(phases=list(phases.values())),
        *(ev.PhaseStarted(phase_id=pid, trace_ids=[step[pid]]) for pid in phases),
    )
    task = await task_state(store, task_id)
    assert await ensure_step_trace(
        traces(store), step["b"], step_trace_created(task, phases["b"], 0)
    )
    await follow_until(alice, step["b"], waits_for_human)
    assert await ensure_step_trace(
        traces(store), step["a"], step_trace_created(task, phases["a"], 0)
    )
    events = await follow_until(alice, step["a"], is_final)
    assert events[-1].event == "completed"
    [sent] = [m for m in await main_path(alice, step["a"]) if m["role"] == "tool"]
    assert sent["content"] == f"Delivered to {step['b']}."

    view = (await alice.get(f"/api/traces/{step['a']}")).json()
    assert view["messaging"] is True
    assert [(c["name"], c["status"]) for c in view["collaborators"]] == [(step["b"], "running")]
    b_view = (await alice.get(f"/api/traces/{step['b']}")).json()
    assert b_view["unread_messages"] == 1
    assert [c["name"] for c in b_view["collaborators"] if c["type"] == "agent"] == [step["a"]]
    assert (await mallory.get(f"/api/traces/{step['b']}")).status_code == 404

    await alice.post(f"/api/traces/{step['b']}/reply", json={"content": "go"})
    assert (await follow_until(alice, step["b"], is_final))[-1].event == "completed"
    results = tool_results(await main_path(alice, step["b"]))
    assert f"From sibling {step['a']}:\n3 found" in results["check_messages"]
