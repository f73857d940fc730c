"""DELETE /api/traces/{id} through the running stack, checked in JetStream and on disk: the
trace and its sub-trace are gone from the stream and from every bucket, object and
directory, every route answers as for an id that never existed, another key's trace is
byte-for-byte the same, and a turn in flight when the delete comes writes nothing back."""

from __future__ import annotations

import base64
import hashlib
import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from longhaul.core.checkpoints import Checkpoint, Checkpoints
from longhaul.core.config import NatsConfig
from longhaul.core.connection import Connection
from longhaul.core.index import TraceIndex
from longhaul.core.store import EventStore, Position
from longhaul.core.workspace import WorkspaceStore
from longhaul.domain import events as ev
from longhaul.domain.ids import new_id
from longhaul.domain.state import TraceState
from longhaul.gateway.auth import owner_id

from tests.integration.executor.scripts import family_script, record_steps, write_script
from tests.integration.gateway.harness import (
    RunningGateway,
    gateway_config,
    serve_gateway,
    user_message,
)
from tests.support.folds import task_state, trace_state
from tests.support.jetstream import holding, stored
from tests.support.stack import InProcessExecutor, wait_for_trace, wait_lease_released

ALICE, BOB = "alice-delete-key-0123456789", "bob-delete-key-9876543210"
OPERATOR = "operator-admin-key-5555555555"
DEADLINE_S = 60
TOOLS = {"tool_modules": ["tests.integration.executor.tooling"]}


def owner_of(key: str) -> str:
    return owner_id(hashlib.sha256(key.encode()).digest())


@pytest.fixture
async def keyed(nats_config: NatsConfig) -> AsyncIterator[RunningGateway]:
    async with serve_gateway(gateway_config(nats_config, api_keys=f"{ALICE},{BOB}")) as running:
        yield running


async def raw_messages(conn: Connection, trace_id: str) -> list[tuple[int, Any]]:
    return [(r.seq, r.event) async for r in EventStore(conn).replay("trace", trace_id)]


def two_steps_done(state: TraceState) -> bool:
    return sum(m.role == "tool" for m in state.messages.values()) >= 2


async def answers(client: httpx.AsyncClient, trace_id: str) -> list[tuple[int, Any]]:
    """What each route answers for ``trace_id``, with the id itself written as ``ID``."""
    calls = [
        ("GET", f"/api/traces/{trace_id}", None),
        ("GET", f"/api/traces/{trace_id}/messages", None),
        ("GET", f"/api/traces/{trace_id}/context", None),
        ("GET", f"/api/traces/{trace_id}/events", None),
        ("POST", f"/api/traces/{trace_id}/run", {}),
        ("POST", f"/api/traces/{trace_id}/stop", None),
        ("POST", f"/api/traces/{trace_id}/reply", {"content": "x"}),
        ("DELETE", f"/api/traces/{trace_id}", None),
    ]
    out = []
    for method, url, body in calls:
        response = await client.request(method, url, json=body)
        out.append((response.status_code, response.text.replace(trace_id, "ID")))
    return out


async def test_delete_erases_the_family_everywhere_and_nothing_of_another_key(
    keyed: RunningGateway, conn: Connection, nats_url: str, namespace: str, tmp_path: Path
) -> None:
    work = tmp_path / "work"
    model = family_script(tmp_path / "family.yaml", child_writes="from-child.txt")
    simple = write_script(tmp_path / "bob.yaml", [{"content": "bob done"}] * 4)
    image = b"\x89PNG\r\n\x1a\n" + os.urandom(20_000)
    url = "data:image/png;base64," + base64.b64encode(image).decode()
    picture = {"type": "image_url", "image_url": {"url": url}}
    first = [
        {"role": "user", "content": [{"type": "text", "text": "a"}, picture]},
        {"role": "assistant", "content": "b"},
        user_message("c"),
        {"role": "assistant", "content": "d"},
        user_message("go"),
    ]  # fmt: skip
    async with (
        InProcessExecutor(nats_url, namespace, settings={"working_root": work}),
        keyed.client(ALICE) as alice,
        keyed.client(BOB) as bob,
    ):
        made = await alice.post("/api/traces", json={"messages": first, "model": model})
        parent = made.json()["trace_id"]
        bobs = (
            await bob.post("/api/traces", json={"messages": [user_message("hi")], "model": simple})
        ).json()["trace_id"]
        for trace_id in (parent, bobs):
            done = await wait_for_trace(EventStore(conn), trace_id, within=DEADLINE_S)
            assert done.status == "completed", done.error
        upload = await alice.post(
            f"/api/traces/{parent}/files", files=[("files", ("data.csv", b"a,b\n", "text/csv"))]
        )
        assert upload.status_code == 202, upload.text
        # a large stored output, as a tool offloads it (past the KV limit: an object)
        await WorkspaceStore(conn).put(f"outputs/{parent}/call_1", b"x" * 300_000)
        (child,) = (await trace_state(EventStore(conn), parent)).subtraces
        family = [parent, child]
        for trace_id in (*family, bobs):  # the executor has let go: nothing more is written
            await wait_lease_released(conn, trace_id)
        home = work / "keys" / owner_of(ALICE) / parent
        assert (home / "from-child.txt").read_text() == "CHILD"

        before = await stored(conn)
        held = await holding(conn, family)
        digest = hashlib.sha256(url.encode()).hexdigest()
        # it is there to be erased: events of both, index, uploads, outputs, objects, image
        assert any(s.startswith(conn.names.subject_root) and child in s for s in held)
        assert any(f"uploads.{parent}" in s for s in held)
        assert f"workspace/outputs/{parent}/call_1" in before["objects"]
        assert any(digest in s for s in before[f"KV_{conn.names.workspace}"])
        bob_before = await raw_messages(conn, bobs)
        bob_subjects = await holding(conn, [bobs])
        bytes_before = (await conn.js.stream_info(conn.names.stream)).state.bytes
        never = "t_01NEVEREXISTED0000000000"
        unknown = await answers(alice, never)

        # another key cannot delete it, and learns nothing
        refused = await bob.delete(f"/api/traces/{parent}")
        assert refused.status_code == 404
        assert refused.text.replace(parent, "ID") == unknown[-1][1].replace(never, "ID")
        assert await holding(conn, family) == held

        deleted = await alice.delete(f"/api/traces/{parent}")
        assert deleted.status_code == 200, deleted.text
        report = deleted.json()
        assert sorted(report["deleted"]) == sorted(family)
        assert report["working_dir"] == "removed" and report["events"] > 0

        after = await stored(conn)
        assert await answers(alice, parent) == [
            (code, text.replace(never, "ID")) for code, text in unknown
        ]
        listed = (await alice.get("/api/traces")).json()["traces"]
        assert not {t["trace_id"] for t in listed} & set(family)
    # the executor is gone: nothing can write any more
    after = await stored(conn)
    left = await holding(conn, family)
    # only the index tombstone, which names nothing but the id and expires
    assert left == [f"$KV.{conn.names.traces}.{i}" for i in sorted(family)]
    assert await TraceIndex(conn).get(parent) is None
    assert not any(digest in s for s in after[f"KV_{conn.names.workspace}"])
    assert not home.exists() and home.parent.exists()
    assert (await conn.js.stream_info(conn.names.stream)).state.bytes < bytes_before
    assert await raw_messages(conn, bobs) == bob_before
    assert await holding(conn, [bobs]) == bob_subjects
    async with keyed.client(BOB) as bob:
        assert (await bob.get(f"/api/traces/{bobs}")).json()["status"] == "completed"


async def test_a_turn_in_flight_is_stopped_and_writes_nothing_back(
    keyed: RunningGateway, conn: Connection, nats_url: str, namespace: str, tmp_path: Path
) -> None:
    log = tmp_path / "steps.log"
    model = record_steps(tmp_path / "slow.yaml", 20, log, hold_ms=400)
    async with (
        InProcessExecutor(nats_url, namespace, settings={**TOOLS, "working_root": tmp_path}),
        keyed.client(ALICE) as alice,
    ):
        trace_id = (
            await alice.post("/api/traces", json={"messages": [user_message("go")], "model": model})
        ).json()["trace_id"]
        await wait_for_trace(EventStore(conn), trace_id, two_steps_done, within=DEADLINE_S)
        deleted = await alice.delete(f"/api/traces/{trace_id}")
        assert deleted.status_code == 200, deleted.text
        steps = log.read_text().count("\n")
        assert (await alice.get(f"/api/traces/{trace_id}")).status_code == 404
    assert steps < 20  # it was stopped, not run to its end
    assert await holding(conn, [trace_id]) == [f"$KV.{conn.names.traces}.{trace_id}"]


async def test_delete_a_task_erases_it_with_its_step_traces(
    keyed: RunningGateway, conn: Connection, nats_url: str, namespace: str, tmp_path: Path
) -> None:
    """The planner's part (plan, phase, step trace, checkpoint, phase output) is written
    as the planner writes it; the step trace runs on a real executor."""
    work = tmp_path / "work"
    write = {"name": "write", "arguments": {"path": "step.txt", "content": "STEP"}}
    model = write_script(tmp_path / "step.yaml", [{"tool_calls": [write]}, {"content": "done"}])
    store = EventStore(conn)
    async with (
        InProcessExecutor(nats_url, namespace, settings={"working_root": work}),
        keyed.client(ALICE) as alice,
        keyed.client(BOB) as bob,
    ):
        task = (await alice.post("/api/tasks", json={"goal": "ship it"})).json()["task_id"]
        planning = await alice.delete(f"/api/tasks/{task}")
        assert planning.status_code == 409, planning.text
        step = new_id("t")
        await plan(store, task, ev.PlanCreated(phases=[ev.PhaseSpec(id="p", name="p")]))
        await plan(store, task, ev.PhaseStarted(phase_id="p", trace_ids=[step]))
        created = ev.TraceCreated(
            messages=[ev.InputMessage(role="user", content="go")],
            config=ev.TraceConfig(model=model),
            owner=owner_of(ALICE),
            task_id=task,
            phase_id="p",
        )
        await store.append("trace", step, [created], expected=Position())
        assert (await wait_for_trace(store, step, within=DEADLINE_S)).status == "completed"
        await WorkspaceStore(conn).put(f"task/{task}/phase/p/output", b"the output")
        checkpoint = Checkpoint(task_id=task, phase_id="p", name="p", result_ref="r")
        await Checkpoints(conn, enabled=True).save(checkpoint)
        await plan(store, task, ev.PhaseCompleted(phase_id="p", summary="ok"), ev.TaskCompleted())
        await wait_lease_released(conn, step)
        held = await holding(conn, [task, step])
        assert any(f"task.{task}" in s for s in held) and any(
            f"checkpoints.task.{task}" in s for s in held
        )
        assert (work / "keys" / owner_of(ALICE) / task / "step.txt").read_text() == "STEP"

        assert (await bob.delete(f"/api/tasks/{task}")).status_code == 404
        assert await holding(conn, [task, step]) == held
        deleted = await alice.delete(f"/api/tasks/{task}")
        assert deleted.status_code == 200, deleted.text
        assert deleted.json()["deleted"] == [step, task]
        assert deleted.json()["working_dir"] == "removed"
        for url in (f"/api/tasks/{task}", f"/api/traces/{step}", f"/api/tasks/{task}/checkpoints"):
            assert (await alice.get(url)).status_code == 404
        assert (await alice.delete(f"/api/tasks/{task}")).status_code == 404
    assert await holding(conn, [task, step]) == [f"$KV.{conn.names.traces}.{step}"]
    assert not (work / "keys" / owner_of(ALICE) / task).exists()


async def plan(store: EventStore, task: str, *events: ev.TaskEvent) -> None:
    """Append to the task as its planner would."""
    state = await task_state(store, task)
    position = Position(state.stream_seq, state.version)
    await store.append("task", task, list(events), expected=position, actor="planner:test")


async def test_an_operator_erases_one_key_s_data_and_nothing_of_another(
    nats_config: NatsConfig, conn: Connection, nats_url: str, namespace: str, tmp_path: Path
) -> None:
    work = tmp_path / "work"
    model = write_script(tmp_path / "one.yaml", [{"content": "done"}] * 4)
    config = gateway_config(nats_config, api_keys=f"{ALICE},{BOB}", admin_keys=[OPERATOR])
    picture = {"type": "image_url", "image_url": {"url": "data:image/png;base64," + "A" * 20_000}}
    experience = {"category": "environment", "content": "no network here"}
    an_eval = {
        "suite": {"name": "s", "tasks": [{"id": "one", "prompt": "hi"}]},
        "models": ["scripted:auto"],
    }
    store = EventStore(conn)
    async with (
        serve_gateway(config) as gateway,
        InProcessExecutor(nats_url, namespace, settings={"working_root": work}),
        gateway.client(ALICE) as alice,
        gateway.client(BOB) as bob,
        gateway.client(OPERATOR) as operator,
    ):
        made: dict[str, list[str]] = {}
        for name, client in (("alice", alice), ("bob", bob)):
            body = {"messages": [{"role": "user", "content": [picture]}], "model": model}
            trace_id = (await client.post("/api/traces", json=body)).json()["trace_id"]
            done = await wait_for_trace(store, trace_id, within=DEADLINE_S)
            assert done.status == "completed", done.error
            files = [("files", ("a.txt", b"a", "text/plain"))]
            assert (await client.post(f"/api/traces/{trace_id}/files", files=files)).is_success
            assert (await client.post("/api/experiences", json=experience)).is_success
            assert (await client.post("/api/evals", json=an_eval)).status_code == 201
            task = (await client.post("/api/tasks", json={"goal": "g"})).json()["task_id"]
            await plan(store, task, ev.TaskFailed(error="given up"))
            made[name] = [trace_id, task]
            await wait_lease_released(conn, trace_id)
        alice_owner, bob_owner = owner_of(ALICE), owner_of(BOB)
        bob_held = await holding(conn, [*made["bob"], bob_owner])
        bob_messages = await raw_messages(conn, made["bob"][0])
        assert any(alice_owner in s for s in await holding(conn, [alice_owner]))
        assert (work / "keys" / alice_owner).is_dir()

        url = f"/api/admin/keys/{alice_owner}/data"
        for tenant in (alice, bob):  # a client key is not the operator's
            assert (await tenant.delete(url)).status_code == 401
        erased = await operator.delete(url)
        assert erased.status_code == 200, erased.text
        report = erased.json()
        assert sorted(report["deleted"]) == sorted(made["alice"]) and report["skipped"] == []
        assert report["working_dir"] == "removed"

        for path in ("/api/traces", "/api/tasks", "/api/experiences", "/api/evals"):
            listed = (await alice.get(path)).json()
            assert not next(v for k, v in listed.items() if isinstance(v, list)), (path, listed)
        assert (await alice.get(f"/api/traces/{made['alice'][0]}")).status_code == 404
        # the key itself still works, from nothing
        assert (await alice.get("/api/info")).status_code == 200
        running = (await alice.post("/api/tasks", json={"goal": "g"})).json()["task_id"]
        again = (await operator.delete(url)).json()
        assert again["skipped"] == [running] and again["deleted"] == []
    left = await holding(conn, [*made["alice"], alice_owner])
    assert left == [f"$KV.{conn.names.traces}.{made['alice'][0]}"]
    assert not (work / "keys" / alice_owner).exists() and (work / "keys" / bob_owner).is_dir()
    assert await holding(conn, [*made["bob"], bob_owner]) == bob_held
    assert await raw_messages(conn, made["bob"][0]) == bob_messages


async def test_without_admin_keys_no_one_erases_a_key(nats_config: NatsConfig) -> None:
    """A tenant key tries the operator's route on a gateway that set no admin key."""
    config = gateway_config(nats_config, api_keys=f"{ALICE},{BOB}")
    async with serve_gateway(config) as gateway, gateway.client(ALICE) as alice:
        refused = await alice.delete(f"/api/admin/keys/{owner_of(BOB)}/data")
        assert refused.status_code == 401
        assert "gateway.admin_keys" in refused.json()["error"]["message"]


async def test_a_trace_no_executor_runs_is_deleted_without_waiting(
    keyed: RunningGateway, conn: Connection
) -> None:
    """Nothing will ever stop it (no executor is consuming), and nothing can write it back:
    the delete does not wait for the stop."""
    async with keyed.client(ALICE) as alice:
        body = {"messages": [user_message("hi")]}
        trace_id = (await alice.post("/api/traces", json=body)).json()["trace_id"]
        deleted = await alice.delete(f"/api/traces/{trace_id}")
        assert deleted.status_code == 200, deleted.text
        assert deleted.json()["events"] == 2  # created, and the stop asked before erasing
        assert (await alice.get(f"/api/traces/{trace_id}")).status_code == 404
    assert await holding(conn, [trace_id]) == [f"$KV.{conn.names.traces}.{trace_id}"]
