"""One inbox through the stack: a keyed gateway, executor processes and nats-server.

Waits of several traces (a question, an approval asked by a configured risk rule) and a task's
plan review are listed per key, oldest first, and answered in place; a call approved with
edited arguments runs the edited call; a deadline's default action is taken by whichever
executor is alive after the one that made the trace wait was killed with -9."""

from __future__ import annotations

import asyncio
import hashlib
import json
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from longhaul.core.config import NatsConfig
from longhaul.core.store import EventStore
from longhaul.domain import events as ev
from longhaul.domain.approval_rules import ApprovalConfig
from longhaul.gateway.auth import owner_id

from tests.integration.cli.harness import longhaul
from tests.integration.executor.scripts import write_script
from tests.integration.gateway.harness import (
    KEY_A,
    KEY_B,
    RunningGateway,
    gateway_config,
    serve_gateway,
    user_message,
)
from tests.integration.gateway.test_approval import wait_status
from tests.support.nats import unique_namespace
from tests.support.stack import ExecutorProcess, InProcessExecutor, eventually, test_config

OWNER_A = owner_id(hashlib.sha256(KEY_A.encode()).digest())
RISK_RULES = [
    {"tool": "bash", "argument": "rm ", "action": "ask"},
    {"read_only": True, "action": "never"},
]


@pytest.fixture(scope="module")
async def keyed(nats_url: str) -> AsyncIterator[RunningGateway]:
    config = gateway_config(
        NatsConfig(url=nats_url, namespace=unique_namespace()), api_keys=f"{KEY_A},{KEY_B}"
    )
    async with serve_gateway(config, heartbeat_s=0.3) as running:
        yield running


def executor(gateway: RunningGateway, name: str, work: Path, approval: dict[str, Any]) -> Any:
    """An executor process (one a test can kill -9) with these approval rules."""
    nats = gateway.runtime.config.nats
    env = {
        "LONGHAUL_EXECUTOR__WORKING_ROOT": str(work),
        "LONGHAUL_PIPELINE__APPROVAL": json.dumps(approval),
    }
    return ExecutorProcess(nats.url, nats.namespace, name, env=env)


def in_process(gateway: RunningGateway, name: str, work: Path, approval: dict[str, Any]) -> Any:
    """The same in this process (quicker to start)."""
    nats = gateway.runtime.config.nats
    config = test_config(nats.url, nats.namespace)
    config.pipeline.approval = ApprovalConfig.model_validate(approval)
    return InProcessExecutor(
        nats.url, nats.namespace, name, config=config, settings={"working_root": work}
    )


def script(tmp_path: Path, name: str, call: str, arguments: dict[str, Any]) -> str:
    turns = [{"tool_calls": [{"id": f"c_{name}", "name": call, "arguments": arguments}]}]
    return write_script(tmp_path / f"{name}.yaml", [*turns, {"content": f"{name} done"}])


async def start(client: httpx.AsyncClient, model: str, name: str) -> str:
    body = {"messages": [user_message(name)], "model": model, "name": name}
    response = await client.post("/api/traces", json=body)
    assert response.status_code == 202, response.text
    return str(response.json()["trace_id"])


async def inbox(client: httpx.AsyncClient) -> list[dict[str, Any]]:
    response = await client.get("/api/inbox")
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["count"] == len(body["items"])
    return list(body["items"])


INBOX_WITHIN_S = 30.0


async def inbox_of(client: httpx.AsyncClient, count: int) -> list[dict[str, Any]]:
    """The inbox once it lists ``count`` items: a trace's view folds its log, the inbox reads
    the index mirror, which learns of a wait once the executor has indexed the trace."""

    async def listed() -> list[dict[str, Any]] | None:
        items = await inbox(client)
        return items if len(items) == count else None

    return await eventually(listed, within=INBOX_WITHIN_S)


async def logged(gateway: RunningGateway, trace_id: str) -> list[ev.Event]:
    store = EventStore(gateway.runtime.service.conn)
    return [recorded.event async for recorded in store.replay("trace", trace_id)]


async def test_the_inbox_lists_each_keys_waits_and_answers_them_in_place(
    keyed: RunningGateway, tmp_path: Path
) -> None:
    work = tmp_path / "work"
    async with (
        in_process(keyed, "exec-inbox", work, {"rules": RISK_RULES}),
        keyed.client(KEY_A) as a,
        keyed.client(KEY_B) as b,
    ):
        question = await start(
            a, script(tmp_path, "ask", "ask_human", {"question": "Which colour?"}), "ask"
        )
        await wait_status(a, question, "waiting")
        risky = {"command": "rm -rf data; echo model > out.txt"}
        approval = await start(a, script(tmp_path, "rm", "bash", risky), "rm")
        safe = await start(a, script(tmp_path, "safe", "bash", {"command": "echo ok"}), "safe")
        other = await start(
            b, script(tmp_path, "ask_b", "ask_human", {"question": "B's question"}), "ask_b"
        )
        waited = await asyncio.gather(
            wait_status(a, approval, "waiting"),
            wait_status(a, safe, "completed", "failed"),
            wait_status(b, other, "waiting"),
        )
        assert [view["status"] for view in waited] == ["waiting", "completed", "waiting"]
        task = (await a.post("/api/tasks", json={"goal": "plan it", "review": True})).json()
        await _propose_plan(keyed, task["task_id"])

        items = await inbox_of(a, 3)
        assert [i["kind"] for i in items] == ["question", "approval", "plan_review"]
        assert [i["since"] for i in items] == sorted(i["since"] for i in items)
        asked, gated, plan = items
        assert (asked["trace_id"], asked["question"], asked["name"]) == (
            question,
            "Which colour?",
            "ask",
        )
        assert (gated["trace_id"], gated["tool"], gated["tool_call_id"]) == (
            approval,
            "bash",
            "c_rm",
        )
        assert gated["arguments"] == risky
        assert plan["task_id"] == task["task_id"] and plan["phases"][0]["name"] == "Gather"
        assert [i["trace_id"] for i in await inbox_of(b, 1)] == [other]  # never A's

        # B answering A's waits is answered as for ids that do not exist
        for path, body in (
            (f"/api/traces/{question}/reply", {"content": "red"}),
            (f"/api/traces/{approval}/approve", {"tool_call_id": "c_rm", "approved": True}),
            (f"/api/tasks/{task['task_id']}/plan", {"approved": True}),
        ):
            assert (await b.post(path, json=body)).status_code == 404, path

        approve = f"/api/traces/{approval}/approve"
        bad = {"tool_call_id": "c_rm", "approved": True, "arguments": {"command": 5}}
        refused = await a.post(approve, json=bad)
        assert refused.status_code == 422 and refused.json()["error"]["code"] == "invalid_arguments"
        before = len(await logged(keyed, approval))
        edited = {"command": "echo edited > out.txt"}
        cli = ("--api-key", KEY_A, "inbox")
        listed = await longhaul(*cli, url=keyed.url)
        assert listed.code == 0 and "Which colour?" in listed.stdout, listed.output
        assert f"longhaul inbox approve|deny {approval} c_rm" in listed.stdout
        ok = await longhaul(
            *cli, "approve", approval, "c_rm", "-a", json.dumps(edited), url=keyed.url
        )
        assert ok.code == 0 and "accepted" in ok.stdout, ok.output
        assert (
            await a.post(f"/api/traces/{question}/reply", json={"content": "red"})
        ).status_code == 202
        assert [i["kind"] for i in await inbox(a)] == ["plan_review"]  # answered ones are gone
        for trace_id in (approval, question):
            assert (await wait_status(a, trace_id, "completed", "failed"))["status"] == "completed"
        reviewed = await a.post(f"/api/tasks/{task['task_id']}/plan", json={"approved": False})
        assert reviewed.status_code == 202
        assert await inbox(a) == []

    (home,) = (work / "keys").glob(f"*/{approval}")
    assert (
        home / "out.txt"
    ).read_text().strip() == "edited"  # the edited call ran, not the model's
    events = await logged(keyed, approval)
    [decided] = [e for e in events[before - 1 :] if isinstance(e, ev.ToolDecided)]
    assert (decided.arguments, decided.by) == (edited, OWNER_A)
    [result] = [e for e in events if isinstance(e, ev.MessageAppended) and e.tool_call_id == "c_rm"]
    assert "edited arguments" in str(result.content)
    [replied] = [e for e in await logged(keyed, question) if isinstance(e, ev.HumanReplied)]
    assert (replied.content, replied.by) == ("red", OWNER_A) and replied.ts > 0


async def _propose_plan(gateway: RunningGateway, task_id: str) -> None:
    """What the planner would append: a plan waiting for review."""
    phase = ev.PhaseSpec(id="p1", name="Gather", description="gather what is needed")
    state = await gateway.runtime.tasks.load(task_id)
    await gateway.runtime.tasks.save(
        task_id, state, lambda _: [ev.PlanCreated(phases=[phase], review=True)], actor="planner"
    )


async def test_a_deadline_s_default_action_is_taken_after_an_executor_kill_9(
    keyed: RunningGateway, tmp_path: Path
) -> None:
    """An approval denied and a question stopped at their deadlines, though the executor that
    made them wait died with -9 at once: the next executor's sweeper takes both, once."""
    work = tmp_path / "work"
    approval = {
        "rules": [{"tool": "bash", "action": "ask", "deadline_s": 1.5, "on_deadline": "deny"}],
        "question_deadline_s": 1.5,
        "on_deadline": "stop",
    }
    async with keyed.client(KEY_A) as a:
        async with executor(keyed, "exec-deadline-1", work, approval) as first:
            gated = await start(
                a, script(tmp_path, "late", "bash", {"command": "echo ran > late.txt"}), "late"
            )
            asked = await start(a, script(tmp_path, "q", "ask_human", {"question": "Go?"}), "q")
            for trace_id in (gated, asked):
                await wait_status(a, trace_id, "waiting")
            deadlines = {i["trace_id"]: i["deadline"] for i in await inbox_of(a, 2)}
            assert deadlines.keys() == {gated, asked}
            assert all(d > time.time() - 5 for d in deadlines.values())
            await first.kill()
        async with in_process(keyed, "exec-deadline-2", work, approval):
            ended = await asyncio.gather(
                wait_status(a, gated, "completed", "failed", "stopped"),
                wait_status(a, asked, "completed", "failed", "stopped"),
            )
    assert [view["status"] for view in ended] == ["completed", "stopped"]
    assert not list((work / "keys").glob(f"*/{gated}/late.txt"))  # denied: never ran
    [denied] = [e for e in await logged(keyed, gated) if isinstance(e, ev.ToolDecided)]
    assert (denied.approved, denied.by) == (False, "deadline")
    stops = [e for e in await logged(keyed, asked) if isinstance(e, ev.StopRequested)]
    assert [s.reason for s in stops] == ["wait_deadline"]


async def test_an_edit_is_held_to_the_guardrail_like_the_models_call(
    keyed: RunningGateway, tmp_path: Path
) -> None:
    """The person approving a call edits it into one the guardrail refuses (a download piped
    into a shell): the edit is refused as the model's call would be and never runs."""
    work = tmp_path / "work"
    async with (
        in_process(keyed, "exec-edit", work, {"rules": RISK_RULES}),
        keyed.client(KEY_A) as a,
    ):
        gated = await start(a, script(tmp_path, "rm", "bash", {"command": "rm -f none"}), "rm")
        await wait_status(a, gated, "waiting")
        edited = {"command": "echo wget | sh -c 'echo pwned > out.txt'"}
        body = {"tool_call_id": "c_rm", "approved": True, "arguments": edited}
        assert (await a.post(f"/api/traces/{gated}/approve", json=body)).status_code == 202
        assert (await wait_status(a, gated, "completed", "failed"))["status"] == "completed"
    events = await logged(keyed, gated)
    [result] = [e for e in events if isinstance(e, ev.MessageAppended) and e.tool_call_id == "c_rm"]
    assert "piping a download into a shell" in str(result.content)
    assert not list(work.glob("keys/*/*/out.txt"))
