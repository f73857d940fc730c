"""Tool approval through the stack: a gateway, executor processes and nats-server. The wait is
on the log, so it survives kill -9 of the executor holding the trace; the decision comes through
the API, and a decision that does not fit the trace is refused without touching the log."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
from longhaul.core.store import EventStore
from longhaul.domain import events as ev
from longhaul.domain.messages import FunctionCall, ToolCall

from tests.integration.executor.scripts import write_script
from tests.integration.gateway.harness import append_as_executor, sse_events, user_message
from tests.support.stack import ExecutorProcess

DEADLINE_S = 60


async def wait_status(client: httpx.AsyncClient, trace_id: str, *statuses: str) -> dict[str, Any]:
    """Follow the trace's events until its view shows one of ``statuses``."""
    async with (
        asyncio.timeout(DEADLINE_S),
        client.stream("GET", f"/api/traces/{trace_id}/events") as response,
    ):
        async for event in sse_events(response):
            if event.id is None and event.event != "heartbeat":
                continue
            view = (await client.get(f"/api/traces/{trace_id}")).json()
            if view["status"] in statuses:
                return dict(view)
    raise AssertionError("stream ended early")


def two_commands(tmp_path: Path) -> str:
    return write_script(
        tmp_path / "approve.yaml",
        [
            {
                "tool_calls": [
                    {"id": "c_keep", "name": "bash", "arguments": {"command": "echo kept > a.txt"}},
                    {"id": "c_drop", "name": "bash", "arguments": {"command": "echo no > b.txt"}},
                ]
            },
            {"content": "did what was allowed"},
        ],
    )


async def test_an_approval_wait_survives_kill_9_and_decisions_are_honoured(
    client: httpx.AsyncClient, nats_url: str, namespace: str, tmp_path: Path
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    env = {"LONGHAUL_EXECUTOR__WORKING_ROOT": str(work)}
    body = {
        "messages": [user_message("write two files")],
        "model": two_commands(tmp_path),
        "approval": {"tools": ["bash"]},
    }
    async with ExecutorProcess(nats_url, namespace, "exec-approve-1", env=env) as first:
        trace_id = (await client.post("/api/traces", json=body)).json()["trace_id"]
        view = await wait_status(client, trace_id, "waiting")
        assert view["wait_reason"] == "approval"
        pending = {p["tool_call_id"]: p for p in view["pending_approvals"]}
        assert set(pending) == {"c_keep", "c_drop"}
        assert pending["c_keep"]["name"] == "bash" and "a.txt" in pending["c_keep"]["arguments"]
        await first.kill()  # kill -9 of the executor that made the trace wait
    assert not (work / "a.txt").exists() and not (work / "b.txt").exists()

    async with ExecutorProcess(nats_url, namespace, "exec-approve-2", env=env):
        denied = await client.post(
            f"/api/traces/{trace_id}/approve",
            json={"tool_call_id": "c_drop", "approved": False, "reason": "keep b clean"},
        )
        assert denied.status_code == 202
        assert (await client.get(f"/api/traces/{trace_id}")).json()["status"] == "waiting"
        again = await client.post(
            f"/api/traces/{trace_id}/approve", json={"tool_call_id": "c_drop", "approved": True}
        )
        assert again.status_code == 409  # decided already: nothing appended
        approved = await client.post(
            f"/api/traces/{trace_id}/approve", json={"tool_call_id": "c_keep", "approved": True}
        )
        assert approved.status_code == 202
        done = await wait_status(client, trace_id, "completed", "failed", "stopped")
    assert done["status"] == "completed", done
    (home,) = (work / "keys").glob(f"*/{trace_id}")  # the key's own directory for it
    assert (home / "a.txt").read_text().strip() == "kept"
    assert not (home / "b.txt").exists()
    messages = (await client.get(f"/api/traces/{trace_id}/messages")).json()["messages"]
    results = {m["tool_call_id"]: str(m["content"]) for m in messages if m["role"] == "tool"}
    assert "denied" in results["c_drop"] and "keep b clean" in results["c_drop"]


async def test_decisions_that_do_not_fit_are_refused(client: httpx.AsyncClient) -> None:
    trace_id = (await client.post("/api/traces", json={"messages": [user_message("hi")]})).json()[
        "trace_id"
    ]
    not_waiting = await client.post(
        f"/api/traces/{trace_id}/approve", json={"tool_call_id": "c_1", "approved": True}
    )
    assert not_waiting.status_code == 409
    for bad in ({}, {"tool_call_id": "c_1"}, {"tool_call_id": "", "approved": True}):
        response = await client.post(f"/api/traces/{trace_id}/approve", json=bad)
        assert response.status_code == 422, bad
    unknown = await client.post(
        "/api/traces/t_nope/approve", json={"tool_call_id": "c_1", "approved": True}
    )
    assert unknown.status_code == 404
    wrong_approval = await client.post(
        "/api/traces",
        json={"messages": [user_message("hi")], "approval": {"tools": "bash"}},
    )
    assert wrong_approval.status_code == 422


async def test_took_effect_answers_only_a_call_whose_outcome_is_unknown(
    client: httpx.AsyncClient, store: EventStore
) -> None:
    """A person may say a call cut off by a crash took effect; not with ``approved`` (a call
    that happened is not run again), and not for a call that merely waits for approval."""
    trace_id = (await client.post("/api/traces", json={"messages": [user_message("pay")]})).json()[
        "trace_id"
    ]
    calls = [
        ToolCall(id=call_id, function=FunctionCall(name=name, arguments="{}"))
        for call_id, name in (("c_cut", "payout"), ("c_gated", "bash"))
    ]
    await append_as_executor(
        store,
        trace_id,
        ev.MessageAppended(
            sequence=2, parent_sequence=1, role="assistant", content="", tool_calls=calls
        ),
        ev.EffectStarted(
            tool_call_id="c_cut",
            tool="payout",
            idempotency_key=f"{trace_id}:c_cut",
            effects="unsafe",
        ),
        ev.EffectResumed(tool_call_id="c_cut", resolution="asked"),
        ev.Waiting(reason="approval", detail="outcome unknown", pending_calls=["c_cut", "c_gated"]),
    )
    view = (await client.get(f"/api/traces/{trace_id}")).json()
    assert [(p["tool_call_id"], p["outcome_unknown"]) for p in view["pending_approvals"]] == [
        ("c_cut", True),
        ("c_gated", False),
    ]
    approve = f"/api/traces/{trace_id}/approve"
    for refused in (
        {"tool_call_id": "c_cut", "approved": True, "took_effect": True},
        {"tool_call_id": "c_gated", "approved": False, "took_effect": True},
    ):
        response = await client.post(approve, json=refused)
        assert response.status_code == 409, (refused, response.text)
    done = {"tool_call_id": "c_cut", "approved": False, "took_effect": True, "reason": "P-3"}
    assert (await client.post(approve, json=done)).status_code == 202
    [decided] = [e async for e in _events(store, trace_id) if isinstance(e, ev.ToolDecided)]
    assert (decided.tool_call_id, decided.took_effect, decided.reason) == ("c_cut", True, "P-3")
    view = (await client.get(f"/api/traces/{trace_id}")).json()
    assert view["cut_off_effects"][0]["decision"] == "took_effect"


async def _events(store: EventStore, trace_id: str) -> AsyncIterator[ev.Event]:
    async for recorded in store.replay("trace", trace_id):
        yield recorded.event
