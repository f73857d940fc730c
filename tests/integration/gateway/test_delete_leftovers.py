"""What a client leaves in the store is gone after its delete and after its key's erasure.

One client of each surface writes a string only it knows: ``/api/traces`` in a system prompt
(the recorded context), ``/a2a`` in a ``contextId``, ``/ag-ui`` in a message id (the thread's
record of what it took), ``/v1`` in a two-turn conversation (two recorded conversation steps).
After ``DELETE /api/traces/{id}`` of each trace, and after the operator erases the key, every
stream of the namespace the server lists (events, every KV bucket with its history, every
object store) is read message by message: neither the string nor a trace id is anywhere but
in the index's expiring tombstones. A ``/v1`` conversation
whose trace was deleted, sent again, starts a new trace."""

from __future__ import annotations

import hashlib
import uuid
from pathlib import Path

import httpx
from longhaul.core.config import NatsConfig
from longhaul.core.connection import Connection
from longhaul.core.store import EventStore
from longhaul.gateway.auth import owner_id

from tests.integration.executor.scripts import write_script
from tests.integration.gateway.harness import gateway_config, serve_gateway, user_message
from tests.integration.gateway.test_a2a_server import rpc, v03_message
from tests.support.jetstream import holding_bytes, streams_of
from tests.support.stack import InProcessExecutor, wait_for_trace, wait_lease_released

ALICE, BOB = "alice-leftover-key-0123456789", "bob-leftover-key-9876543210"
OPERATOR = "operator-leftover-key-5555555555"
DEADLINE_S = 60


async def _traces_of_every_surface(
    client: httpx.AsyncClient, model: str, secret: str
) -> tuple[list[str], list[dict[str, str]]]:
    """(trace ids, the /v1 conversation as last answered) of one client writing ``secret``
    through ``/api/traces``, ``/a2a`` and two ``/v1`` turns."""
    made = await client.post(
        "/api/traces",
        json={
            "messages": [user_message("hello")],
            "model": model,
            "system_prompt": f"You help {secret} only.",
        },
    )
    assert made.status_code == 202, made.text
    a2a = v03_message(f"m-{secret}", model, "hi", contextId=f"ctx-{secret}")
    sent = (await rpc(client, "message/send", a2a)).json()
    assert sent["result"]["status"]["state"] == "completed", sent
    conversation = [{"role": "user", "content": f"remember {secret}"}]
    chat_ids = []
    for turn in range(2):
        chat = await client.post(
            "/v1/chat/completions", json={"model": model, "messages": conversation}
        )
        assert chat.status_code == 200, chat.text
        chat_ids.append(chat.json()["trace_id"])
        conversation += [
            {"role": "assistant", "content": chat.json()["choices"][0]["message"]["content"]},
            {"role": "user", "content": f"turn {turn}"},
        ]
    assert chat_ids[0] == chat_ids[1]  # one trace, two recorded conversation steps
    thread = {
        "threadId": f"thread-{secret}",
        "runId": "r1",
        "messages": [{"id": f"msg-{secret}", "role": "user", "content": "hi"}],
        "forwardedProps": {"model": model},
    }
    async with client.stream("POST", "/ag-ui", json=thread) as run:
        assert run.status_code == 200
        streamed = b"".join([chunk async for chunk in run.aiter_bytes()])
    assert b'"RUN_FINISHED"' in streamed, streamed
    ag_ui = run.headers["x-longhaul-trace-id"]
    ids = [made.json()["trace_id"], sent["result"]["id"], chat_ids[0], ag_ui]
    return ids, conversation[:-1]


async def _settled(conn: Connection, trace_ids: list[str]) -> None:
    for trace_id in trace_ids:
        done = await wait_for_trace(EventStore(conn), trace_id, within=DEADLINE_S)
        assert done.status == "completed", done.error
        await wait_lease_released(conn, trace_id)


def _only_tombstones(conn: Connection, found: list[tuple[str, str]], ids: list[str]) -> None:
    tombstones = {(f"KV_{conn.names.traces}", f"$KV.{conn.names.traces}.{i}") for i in ids}
    assert set(found) <= tombstones, sorted(set(found) - tombstones)


async def test_nothing_of_a_client_outlives_its_deletes_or_its_key_s_erasure(
    nats_config: NatsConfig, conn: Connection, nats_url: str, namespace: str, tmp_path: Path
) -> None:
    model = write_script(tmp_path / "done.yaml", [{"content": "noted"}] * 40)
    config = gateway_config(nats_config, api_keys=f"{ALICE},{BOB}", admin_keys=[OPERATOR])
    alice_owner = owner_id(hashlib.sha256(ALICE.encode()).digest())
    async with (
        serve_gateway(config) as gateway,
        InProcessExecutor(nats_url, namespace, settings={"working_root": tmp_path / "work"}),
        gateway.client(ALICE) as alice,
        gateway.client(BOB) as bob,
        gateway.client(OPERATOR) as operator,
    ):
        bob_secret = f"bob-{uuid.uuid4().hex}"
        bob_ids, _ = await _traces_of_every_surface(bob, model, bob_secret)

        # the deletes, one trace at a time
        secret = f"alice-{uuid.uuid4().hex}"
        ids, conversation = await _traces_of_every_surface(alice, model, secret)
        await _settled(conn, [*ids, *bob_ids])
        streams = await streams_of(conn)
        assert f"KV_{conn.names.workspace}" in streams and f"OBJ_{conn.names.artifacts}" in streams
        before = await holding_bytes(conn, [secret.encode()])
        # it is there to be erased: the recorded context and the A2A context at least
        assert any(s == f"KV_{conn.names.workspace}" and ".context." in j for s, j in before)
        assert any(s == f"KV_{conn.names.workspace}" and ".a2a." in j for s, j in before)
        assert any(s == f"KV_{conn.names.workspace}" and ".ag-ui." in j for s, j in before)
        for trace_id in ids:
            deleted = await alice.delete(f"/api/traces/{trace_id}")
            assert deleted.status_code == 200, deleted.text
        assert await holding_bytes(conn, [secret.encode()]) == []
        _only_tombstones(conn, await holding_bytes(conn, [i.encode() for i in ids]), ids)

        # the conversation sent again is a new one, not a 404 for ever
        again = await alice.post(
            "/v1/chat/completions", json={"model": model, "messages": conversation}
        )
        assert again.status_code == 200, again.text
        assert again.json()["trace_id"] not in ids

        # the operator's erasure of the key
        secret = f"alice-{uuid.uuid4().hex}"
        erased_ids, _ = await _traces_of_every_surface(alice, model, secret)
        erased_ids.append(again.json()["trace_id"])
        await _settled(conn, erased_ids)
        assert await holding_bytes(conn, [secret.encode()]) != []
        erased = await operator.delete(f"/api/admin/keys/{alice_owner}/data")
        assert erased.status_code == 200, erased.text
        assert await holding_bytes(conn, [secret.encode(), alice_owner.encode()]) == []
        gone = [*ids, *erased_ids]
        _only_tombstones(conn, await holding_bytes(conn, [i.encode() for i in gone]), gone)

        # nothing of the other key went
        assert await holding_bytes(conn, [bob_secret.encode()]) != []
        for trace_id in bob_ids:
            assert (await bob.get(f"/api/traces/{trace_id}")).status_code == 200
