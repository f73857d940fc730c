"""A second key attacking this session's routes through the real gateway and nats-server:
experiences (records, import), the inbox and the a2a webhook, ``POST /api/runs`` and plan
review. Another key's ids answer 404 exactly like unknown ones, malformed input is a 4xx with
a code, nothing is appended or stored by a refused request, and the gateway keeps serving."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
from longhaul.core.config import NatsConfig
from longhaul.core.connection import connect
from longhaul.core.store import EventStore
from longhaul.core.workspace import WorkspaceStore
from longhaul.domain import events as ev

from tests.integration.executor.scripts import write_script
from tests.integration.gateway.harness import (
    RunningGateway,
    gateway_config,
    serve_gateway,
    user_message,
)
from tests.integration.gateway.test_full_stack import follow_until, is_final, waits_for_human
from tests.integration.gateway.test_tasks_api import planner_appends
from tests.support.counting_server import counting_server
from tests.support.stack import InProcessExecutor

KEY_A, KEY_B = "key-a-attacks-0123456789", "key-b-attacks-9876543210"
MAX_BODY = 64 * 1024
EDITED = {
    "id": "p1",
    "name": "Edited p1",
    "description": "carry out the edited step p1 in full",
    "preset": "default",
    "criteria": ["p1 is done"],
}


@pytest.fixture
async def gateway(nats_config: NatsConfig) -> AsyncIterator[RunningGateway]:
    config = gateway_config(nats_config, api_keys=f"{KEY_A},{KEY_B}", max_body_bytes=MAX_BODY)
    async with serve_gateway(config) as gw:
        yield gw


@pytest.fixture
async def alice(gateway: RunningGateway) -> AsyncIterator[httpx.AsyncClient]:
    async with gateway.client(KEY_A) as http:
        yield http


@pytest.fixture
async def mallory(gateway: RunningGateway) -> AsyncIterator[httpx.AsyncClient]:
    async with gateway.client(KEY_B) as http:
        yield http


def error_code(response: httpx.Response) -> str:
    return str(response.json()["error"]["code"])


async def event_types(store: EventStore, aggregate: ev.Aggregate, aggregate_id: str) -> list[str]:
    return [type(r.event).__name__ async for r in store.replay(aggregate, aggregate_id)]


async def test_experiences_refuse_malformed_input_and_store_nothing(
    alice: httpx.AsyncClient,
) -> None:
    bodies: list[object] = [
        {"category": "tool_usage", "content": 123},
        {"category": "tool_usage", "content": "x", "tags": "search"},
        {"category": "tool_usage", "content": "x", "tags": {"intent": "search"}},
        {"category": "../etc", "content": "x"},
        {"category": "tool_usage", "content": "x", "owner": "k_0000000000000000"},
        {"category": "tool_usage", "content": "x" * 8001},
        [],
    ]
    for body in bodies:
        refused = await alice.post("/api/experiences", json=body)
        assert refused.status_code == 422, body
    for query in ("limit=0", "limit=501", "cursor=-1", "cursor=abc", "limit=ten"):
        assert (await alice.get(f"/api/experiences?{query}")).status_code == 422, query
    for path in ("ex_a.b", "ex_..", "ex_%2e%2e%2fx", "..%2Fexport", "ex_*", "ex_>"):
        assert (await alice.get(f"/api/experiences/{path}")).status_code in (404, 405), path
        assert (await alice.delete(f"/api/experiences/{path}")).status_code in (404, 405), path

    item = (
        await alice.post("/api/experiences", json={"category": "tool_usage", "content": "kept"})
    ).json()
    url = f"/api/experiences/{item['id']}"
    for change in (
        {"metrics": {"helpful": -1}},
        {"metrics": {"helpful": "lots"}},
        {"metrics": {"helpful": 2**40}},
        {"id": "ex_other"},
        {"trace_id": "t_someone_else"},
        {"created_at": "2020-01-01T00:00:00Z"},
    ):
        assert (await alice.patch(url, json=change)).status_code == 422, change
    malformed = await alice.patch(
        url, content=b'{"content": ', headers={"Content-Type": "application/json"}
    )
    assert malformed.status_code == 400 and error_code(malformed) == "malformed_json"

    for raw, code in (
        (b"", "invalid_experience_file"),
        (b"\xff\xfe---\n", "invalid_experience_file"),
        (b"---\n- a list\n---\nx\n", "invalid_experience_file"),
        (
            b"---\nid: ../../k_victim/ex_1\ncategory: tool_usage\n---\nx\n",
            "invalid_experience_file",
        ),
        (b"---\nid: ex_a.b\ncategory: tool_usage\n---\nx\n", "invalid_experience_file"),
        (b"---\ncategory: tool_usage\ncreated_at: yesterday\n---\nx\n", "invalid_experience_file"),
        (b"---\ncategory: tool_usage\nmetrics: {helpful: -5}\n---\nx\n", "invalid_experience_file"),
        (b"---\ncategory: tool_usage\nowner: k_0000000000000000\n---\nx\n", ""),
        (
            b"---\nid: ex_1\ncategory: tool_usage\n---\na\n"
            b"---\nid: ex_1\ncategory: tool_usage\n---\nb\n",
            "",
        ),
    ):
        refused = await alice.post("/api/experiences/import", content=raw)
        assert refused.status_code == 422, raw
        assert not code or error_code(refused) == code, refused.text
    bomb = b"---\ncategory: tool_usage\n---\n" + b"x" * MAX_BODY
    too_big = await alice.post("/api/experiences/import", content=bomb)
    assert too_big.status_code == 413 and error_code(too_big) == "body_too_large"

    listed = (await alice.get("/api/experiences")).json()["experiences"]
    assert [(e["id"], e["content"], e["metrics"]) for e in listed] == [
        (item["id"], "kept", {"helpful": 0, "harmful": 0})
    ]


async def test_an_import_is_bounded_in_records_and_all_or_nothing(
    alice: httpx.AsyncClient,
) -> None:
    block = "---\ncategory: tool_usage\n---\nr\n"
    many = await alice.post("/api/experiences/import", content=(block * 1001).encode())
    assert many.status_code == 413 and error_code(many) == "too_many_experiences"
    assert (await alice.get("/api/experiences")).json()["experiences"] == []
    # The last block is broken: none of the good ones before it is kept.
    partly = block * 3 + "---\ncategory: nope\n---\nr\n"
    assert (await alice.post("/api/experiences/import", content=partly.encode())).status_code == 422
    assert (await alice.get("/api/experiences")).json()["experiences"] == []
    fine = await alice.post("/api/experiences/import", content=(block * 1000).encode())
    assert fine.status_code == 200 and fine.json()["imported"] == 1000
    listed = (await alice.get("/api/experiences", params={"limit": 500, "cursor": "500"})).json()
    assert len(listed["experiences"]) == 500 and listed["next_cursor"] is None


async def test_inbox_refuses_other_keys_bad_ids_and_bad_bodies(
    alice: httpx.AsyncClient, mallory: httpx.AsyncClient, store: EventStore
) -> None:
    created = await alice.post(
        "/api/traces",
        json={"messages": [user_message("wait")], "model": "scripted:auto", "messaging": True},
    )
    trace_id = created.json()["trace_id"]
    before = await event_types(store, "trace", trace_id)
    message = {"from": "ops", "content": "hello"}

    for target in (trace_id, f"{trace_id}.>", "*", ">", "t_x.t_y", "..", "%2e%2e%2f", "t_nope"):
        for client in (mallory, alice):
            if client is alice and target == trace_id:
                continue
            inbox = await client.post(f"/api/traces/{target}/inbox", json=message)
            assert inbox.status_code in (404, 405), (target, inbox.text)
            hook = await client.post("/webhook/a2a-messages", json={"trace_id": target, **message})
            assert hook.status_code == 404, (target, hook.text)
            assert error_code(hook) == "not_found"
    # Another key's trace is reported exactly like one that does not exist.
    theirs = await mallory.post("/webhook/a2a-messages", json={"trace_id": trace_id, **message})
    missing = await mallory.post("/webhook/a2a-messages", json={"trace_id": "t_nope", **message})
    assert theirs.json()["error"]["message"].replace(trace_id, "ID") == (
        missing.json()["error"]["message"].replace("t_nope", "ID")
    )

    url = f"/api/traces/{trace_id}/inbox"
    for body in (
        {"from": "ops", "content": "hi", "wake": "yes"},
        {"from": "ops", "content": 5},
        {"from": "", "content": "hi"},
        {"from": "x" * 201, "content": "hi"},
        {"from": "ops", "content": "hi", "sender_trace_id": "t_forged"},
        {"from": "ops", "content": "hi", "message_id": "msg_forged"},
    ):
        refused = await alice.post(url, json=body)
        assert refused.status_code == 422, body
    for body in ({"from": "ops", "content": "hi"}, {"trace_id": 7, **message}):
        assert (await alice.post("/webhook/a2a-messages", json=body)).status_code == 422, body
    too_big = await alice.post(url, json={"from": "ops", "content": "x" * MAX_BODY})
    assert too_big.status_code == 413
    broken = await alice.post(url, content=b"{", headers={"Content-Type": "application/json"})
    assert broken.status_code == 400 and error_code(broken) == "malformed_json"
    assert await event_types(store, "trace", trace_id) == before

    accepted = await alice.post(url, json=message)
    assert accepted.status_code == 202
    assert await event_types(store, "trace", trace_id) == [*before, "MessageReceived"]


async def test_runs_validate_like_traces_and_tasks_and_stay_with_their_key(
    alice: httpx.AsyncClient, mallory: httpx.AsyncClient
) -> None:
    for body in (
        {},
        {"goal": ""},
        {"goal": 5},
        {"goal": "g", "mode": "team"},
        {"goal": "g", "tools": "bash"},
        {"goal": "g", "tools": ["../bin/sh"]},
        {"goal": "g", "preset": "a/b"},
        {"goal": "g", "max_iterations": 0},
        {"goal": "g", "review": "yes"},
        {"goal": "g", "owner": "k_0000000000000000"},
        {"goal": "g", "model": "no-provider"},
    ):
        refused = await alice.post("/api/runs", json=body)
        assert refused.status_code == 422, body
        assert error_code(refused) == "invalid_request"
    for mode in ("trace", "task"):
        for model in ("scripted:/etc/passwd", "scripted:../../x.yaml", "scripted:x.yaml"):
            refused = await alice.post(
                "/api/runs", json={"goal": "g", "mode": mode, "model": model}
            )
            assert refused.status_code == 422 and error_code(refused) == "invalid_model", model
            same = await alice.post(
                "/api/traces" if mode == "trace" else "/api/tasks",
                json={"messages": [user_message("g")], "model": model}
                if mode == "trace"
                else {"goal": "g", "options": {"model": model}},
            )
            assert same.status_code == 422 and error_code(same) == "invalid_model", model
    too_big = await alice.post("/api/runs", json={"goal": "x" * MAX_BODY})
    assert too_big.status_code == 413

    trace = (await alice.post("/api/runs", json={"goal": "hi", "mode": "trace"})).json()
    task = (await alice.post("/api/runs", json={"goal": "hi", "mode": "task"})).json()
    for path in (
        f"/api/traces/{trace['trace_id']}",
        f"/api/traces/{trace['trace_id']}/messages",
        f"/api/tasks/{task['task_id']}",
    ):
        assert (await alice.get(path)).status_code == 200, path
        assert (await mallory.get(path)).status_code == 404, path
    assert (await mallory.get("/api/traces")).json()["traces"] == []
    assert (await mallory.get("/api/tasks")).json()["tasks"] == []


async def test_plan_review_is_the_owners_and_checks_what_it_is_given(
    alice: httpx.AsyncClient, mallory: httpx.AsyncClient, store: EventStore
) -> None:
    task_id = (await alice.post("/api/tasks", json={"goal": "g", "review": True})).json()["task_id"]
    url = f"/api/tasks/{task_id}/plan"
    early = await alice.post(url, json={"approved": True})
    assert early.status_code == 409 and error_code(early) == "conflict"
    await planner_appends(
        store, task_id, ev.PlanCreated(phases=[ev.PhaseSpec(id="p1", name="do")], review=True)
    )
    before = await event_types(store, "task", task_id)

    for body in ({"approved": True}, {"approved": False, "reason": "mine now"}):
        refused = await mallory.post(url, json=body)
        assert refused.status_code == 404 and error_code(refused) == "not_found"
    for bad_id in ("task_nope", "task_x.>", "*", "..%2F.."):
        probe = await alice.post(f"/api/tasks/{bad_id}/plan", json={"approved": True})
        assert probe.status_code in (404, 405), bad_id

    for review in (
        {},
        {"approved": "yes"},
        {"approved": True, "phases": []},
        {"approved": True, "phases": "p1"},
        {"approved": True, "phases": [7]},
        {"approved": False, "phases": [EDITED]},
        {"approved": True, "extra": 1},
        {"approved": True, "reason": "x" * 201},
    ):
        refused = await alice.post(url, json=review)
        assert refused.status_code == 422, review
        assert error_code(refused) == "invalid_request", review
    for phases, code in (
        ([{**EDITED, "depends_on": ["p9"]}], "invalid_plan"),
        ([EDITED, EDITED], "invalid_plan"),
        ([{**EDITED, "model": "scripted:/etc/passwd"}], "invalid_model"),
        ([{**EDITED, "verification": {"command": "rm -rf /"}}], "invalid_verification"),
        ([{**EDITED, "verification": {"check": "not-configured"}}], "invalid_verification"),
    ):
        refused = await alice.post(url, json={"approved": True, "phases": phases})
        assert refused.status_code == 422, phases
        assert error_code(refused) == code, refused.text
    assert await event_types(store, "task", task_id) == before

    # An approval and a refusal racing: exactly one is recorded, the other is a 409.
    answers = await asyncio.gather(
        alice.post(url, json={"approved": True, "phases": [EDITED]}),
        alice.post(url, json={"approved": False, "reason": "changed my mind"}),
    )
    assert sorted(a.status_code for a in answers) == [202, 409], [a.text for a in answers]
    assert await event_types(store, "task", task_id) == [*before, "PlanReviewed"]
    again = await alice.post(url, json={"approved": False})
    assert again.status_code == 409


async def test_send_message_never_reaches_another_keys_trace(
    alice: httpx.AsyncClient,
    mallory: httpx.AsyncClient,
    store: EventStore,
    nats_url: str,
    namespace: str,
    tmp_path: Path,
) -> None:
    async with InProcessExecutor(
        nats_url, namespace, "exec-attacks", settings={"working_root": tmp_path / "work"}
    ):
        waiting = write_script(
            tmp_path / "wait.yaml",
            [{"tool_calls": [{"name": "ask_human", "arguments": {"question": "go?"}}]}],
        )
        created = await alice.post(
            "/api/traces",
            json={"messages": [user_message("wait")], "model": waiting, "messaging": True},
        )
        victim = created.json()["trace_id"]
        await follow_until(alice, victim, waits_for_human)
        before = await event_types(store, "trace", victim)

        attacker = write_script(
            tmp_path / "attack.yaml",
            [
                {
                    "tool_calls": [
                        {"name": "send_message", "arguments": {"to": victim, "content": "x"}},
                        {"name": "send_message", "arguments": {"to": "parent", "content": "x"}},
                    ]
                },
                {"content": "done"},
            ],
        )
        created = await mallory.post(
            "/api/traces",
            json={"messages": [user_message("go")], "model": attacker, "messaging": True},
        )
        trace_id = created.json()["trace_id"]
        events = await follow_until(mallory, trace_id, is_final)
        assert events[-1].event == "completed"
        messages = (await mallory.get(f"/api/traces/{trace_id}/messages")).json()["messages"]
        outputs = [str(m["content"]) for m in messages if m["role"] == "tool"]
        assert len(outputs) == 2
        assert all("is not an agent you work with (you can reach: nobody)" in o for o in outputs)
        assert await event_types(store, "trace", victim) == before
        assert (await alice.get(f"/api/traces/{victim}")).json()["unread_messages"] == 0


async def test_the_new_routes_need_a_key(gateway: RunningGateway) -> None:
    async with gateway.client() as anonymous, gateway.client("not-a-key-0123456789") as wrong:
        for client in (anonymous, wrong):
            for method, path in (
                ("GET", "/api/experiences"),
                ("GET", "/api/experiences/export"),
                ("POST", "/api/experiences/import"),
                ("GET", "/api/skills"),
                ("GET", "/api/tools"),
                ("POST", "/api/runs"),
                ("POST", "/api/traces/t_x/inbox"),
                ("POST", "/webhook/a2a-messages"),
                ("POST", "/api/tasks/task_x/plan"),
            ):
                response = await client.request(method, path, json={})
                assert response.status_code == 401, (method, path, response.text)


async def test_workspace_read_never_opens_another_keys_output(
    gateway: RunningGateway,
    alice: httpx.AsyncClient,
    mallory: httpx.AsyncClient,
    nats_url: str,
    namespace: str,
    tmp_path: Path,
) -> None:
    quiet = write_script(tmp_path / "quiet.yaml", [{"content": "ok"}])
    created = await alice.post(
        "/api/traces", json={"messages": [user_message("hold")], "model": quiet}
    )
    victim = created.json()["trace_id"]
    key = f"outputs/{victim}/c1"
    conn = await connect(gateway.runtime.config.nats)
    try:
        await WorkspaceStore(conn).put(key, b"ALICE-OUTPUT")
    finally:
        await conn.close()
    thief = write_script(
        tmp_path / "thief.yaml",
        [
            {"tool_calls": [{"id": "c1", "name": "workspace_read", "arguments": {"key": key}}]},
            {"content": "done"},
        ],
    )
    async with InProcessExecutor(
        nats_url, namespace, "exec-thief", settings={"working_root": tmp_path / "work"}
    ):
        created = await mallory.post(
            "/api/traces",
            json={"messages": [user_message("steal")], "model": thief, "tools": ["workspace_read"]},
        )
        trace_id = created.json()["trace_id"]
        await follow_until(mallory, trace_id, is_final)
    messages = (await mallory.get(f"/api/traces/{trace_id}/messages")).json()["messages"]
    [output] = [str(m["content"]) for m in messages if m["role"] == "tool"]
    assert "does not exist" in output and "ALICE" not in output


async def test_a_verification_schema_that_would_fetch_or_backtrack_is_refused_at_the_door(
    alice: httpx.AsyncClient,
) -> None:
    """jsonschema fetches a remote ``$ref`` (loopback, cloud metadata) and runs ``pattern``
    on a backtracking engine: such a schema is a 422 and nothing is fetched or logged."""
    with counting_server() as (url, hits):
        before = len((await alice.get("/api/traces?limit=200")).json()["traces"])
        for schema in (
            {"$ref": f"{url}/metadata.json"},
            {"properties": {"a": {"$ref": f"{url}/x#/defs/a"}}},
            {"$dynamicRef": f"{url}/y"},
            {"type": "string", "pattern": "(a)\\1"},
        ):
            body = {"messages": [user_message("x")], "verification": {"json_schema": schema}}
            refused = await alice.post("/api/traces", json=body)
            assert refused.status_code == 422, schema
            assert error_code(refused) == "invalid_verification"
            assert "json_schema cannot be used" in refused.json()["error"]["message"]
        assert hits == []
        assert len((await alice.get("/api/traces?limit=200")).json()["traces"]) == before


async def test_a_client_cannot_make_the_executor_load_a_file_as_a_local_model(
    alice: httpx.AsyncClient,
) -> None:
    """``local:<path>`` would load any file (an upload) into llama.cpp inside the executor."""
    before = len((await alice.get("/api/traces?limit=200")).json()["traces"])
    for model in ("local:/tmp/upload.gguf", "local:../work/keys/k/evil.gguf"):
        refused = await alice.post(
            "/api/traces", json={"messages": [user_message("x")], "model": model}
        )
        assert refused.status_code == 422, model
        assert error_code(refused) == "invalid_model"
        assert "not a local model of this deployment" in refused.json()["error"]["message"]
        run = await alice.post("/api/runs", json={"goal": "x", "model": model})
        assert run.status_code == 422 and error_code(run) == "invalid_model"
    assert len((await alice.get("/api/traces?limit=200")).json()["traces"]) == before


async def test_a_fallback_chain_is_checked_like_a_model_and_refused_whole(
    alice: httpx.AsyncClient,
) -> None:
    """Each entry of ``model_fallback`` is refused with a 422 naming it, before anything is
    written: never found out at run time, when the outage comes."""
    refused_models = {
        ("openai:gpt-4o", "nosuch:model"): "model_fallback[1]",  # unknown provider
        ("scripted:/etc/passwd",): "model_fallback[0]",  # outside models.scripted_dir
        ("anthropic:claude", "local:/etc/passwd"): "model_fallback[1]",  # operator-only
    }
    for chain, field in refused_models.items():
        body = {"messages": [user_message("g")], "model_fallback": list(chain)}
        refused = await alice.post("/api/traces", json=body)
        assert refused.status_code == 422 and error_code(refused) == "invalid_model", chain
        assert refused.json()["error"]["message"].startswith(f"{field}: "), refused.text
    malformed: list[object] = ["openai:gpt-4o", 5, ["no-provider"], [7], ["openai:x"] * 9]
    for value in malformed:
        body = {"messages": [user_message("g")], "model_fallback": value}
        refused = await alice.post("/api/traces", json=body)
        assert refused.status_code == 422 and error_code(refused) == "invalid_request", value
        assert "model_fallback" in refused.text
    listed = await alice.get("/api/traces")
    assert listed.json()["traces"] == []
    accepted = await alice.post(
        "/api/traces",
        json={"messages": [user_message("g")], "model_fallback": ["anthropic:claude-x"]},
    )
    assert accepted.status_code == 202, accepted.text
