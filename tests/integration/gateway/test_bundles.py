"""Export → import through the running stack: a trace with a sub-trace, a stored output and a
rewind branch reads back identical under another key with new ids, and goes on there; a bundle
can never reach the exporter's data; a version 1 bundle imports; bad bundles are 4xx."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import msgspec
import pytest
from longhaul.client import AsyncClient
from longhaul.core.config import NatsConfig
from longhaul.core.connection import Connection
from longhaul.core.store import EventStore, Position
from longhaul.core.workspace import WorkspaceStore
from longhaul.domain import events as ev
from longhaul.domain.config import RemoteAgentConfig
from longhaul.domain.imports import IMPORT_ACTOR, ImportReply
from longhaul.gateway.auth import owner_id
from nats.aio.msg import Msg

from tests.integration.executor.scripts import family_script
from tests.integration.gateway.harness import (
    RunningGateway,
    gateway_config,
    serve_gateway,
    user_message,
)
from tests.support.folds import trace_state
from tests.support.jetstream import holding_bytes
from tests.support.stack import InProcessExecutor, wait_for_trace

ALICE, BOB = "alice-bundle-key-0123456789", "bob-bundle-key-9876543210"
DEADLINE_S = 60
V1 = Path(__file__).with_name("fixtures") / "bundle_v1.json"
# fields that say when or where, not what
VOLATILE = {"created_at", "updated_at", "event_id", "ts"}


def owner_of(key: str) -> str:
    return owner_id(hashlib.sha256(key.encode()).digest())


@pytest.fixture
async def keyed(nats_config: NatsConfig) -> AsyncIterator[RunningGateway]:
    config = gateway_config(nats_config, api_keys=f"{ALICE},{BOB}", max_upload_bytes=2_000_000)
    async with serve_gateway(config) as running:
        yield running


def renamed(value: Any, ids: dict[str, str]) -> Any:
    """``value`` with every id of ``ids`` written as its new id, volatile fields dropped."""
    text = json.dumps(value)
    for old, new in ids.items():
        text = text.replace(old, new)
    return _stable(json.loads(text))


def _stable(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _stable(v) for k, v in value.items() if k not in VOLATILE}
    if isinstance(value, list):
        return [_stable(v) for v in value]
    return value


async def test_export_import_round_trips_a_family_under_another_key(
    keyed: RunningGateway, conn: Connection, nats_url: str, namespace: str, tmp_path: Path
) -> None:
    model = family_script(
        tmp_path / "family.yaml",
        child_writes="child.txt",
        then=("continued after the import",),
    )
    first = [
        user_message("a"), {"role": "assistant", "content": "b"},
        user_message("c"), {"role": "assistant", "content": "d"}, user_message("go"),
    ]  # fmt: skip
    store = EventStore(conn)
    async with (
        InProcessExecutor(nats_url, namespace, settings={"working_root": tmp_path / "work"}),
        keyed.client(ALICE) as alice,
        keyed.client(BOB) as bob,
    ):
        made = await alice.post("/api/traces", json={"messages": first, "model": model})
        parent = made.json()["trace_id"]
        assert (await wait_for_trace(store, parent, within=DEADLINE_S)).status == "completed"
        # a rewind branch: from message 5 again (a second child), then the same answer
        rewound = await alice.post(f"/api/traces/{parent}/run", json={"after_sequence": 5})
        assert rewound.status_code == 202, rewound.text
        done = await wait_for_trace(
            store, parent, lambda s: s.is_final and s.runs >= 2, within=DEADLINE_S
        )
        assert done.status == "completed" and len(done.subtraces) == 2
        call = next(m.tool_call_id for m in done.messages.values() if m.role == "tool")
        await WorkspaceStore(conn).put(f"outputs/{parent}/{call}", b"y" * 300_000)

        assert (await bob.get(f"/api/traces/{parent}/export")).status_code == 404
        exported = await alice.get(f"/api/traces/{parent}/export")
        assert exported.status_code == 200, exported.text
        bundle = exported.content
        kinds = {f["kind"] for f in json.loads(bundle)["files"]}
        assert {"outputs", "context"} <= kinds  # the stored output, the recorded prompt
        imported = await bob.post("/api/traces/import", content=bundle)
        assert imported.status_code == 201, imported.text
        ids = imported.json()["traces"]
        new = imported.json()["trace_id"]
        assert set(ids) == {parent, *done.subtraces} and not set(ids.values()) & set(ids)

        for old, fresh in ids.items():  # message tree, goals, totals, sub-traces: identical
            for suffix in ("", "/messages"):
                theirs = (await alice.get(f"/api/traces/{old}{suffix}")).json()
                ours = (await bob.get(f"/api/traces/{fresh}{suffix}")).json()
                assert _stable(ours) == renamed(theirs, ids), (old, suffix)
            assert (await alice.get(f"/api/traces/{fresh}")).status_code == 404
        output = await bob.get(f"/api/traces/{new}/outputs/{call}")
        assert output.status_code == 200 and len(output.content) == 300_000

        # the exporter's family is untouched; a second import gets other ids again
        assert (await alice.get(f"/api/traces/{parent}")).json()["status"] == "completed"
        again = (await bob.post("/api/traces/import", content=bundle)).json()
        assert not set(again["traces"].values()) & set(ids.values())

        # it goes on under its new key, and can be rewound there
        more = await bob.post(f"/api/traces/{new}/run", json={"messages": [user_message("more")]})
        assert more.status_code == 202, more.text
        went_on = await wait_for_trace(
            store, new, lambda s: s.is_final and s.runs >= 3, within=DEADLINE_S
        )
        assert went_on.messages[went_on.head_sequence].content == "continued after the import"
        assert went_on.owner == owner_of(BOB)
        head = went_on.head_sequence  # rewound to "more": a new answer on a new branch
        again = await bob.post(f"/api/traces/{new}/run", json={"after_sequence": head - 1})
        assert again.status_code == 202, again.text
        back = await wait_for_trace(
            store, new, lambda s: s.is_final and s.runs >= 4, within=DEADLINE_S
        )
        assert back.head_sequence > head and head not in {m.sequence for m in back.main_path()}


async def test_bad_bundles_are_refused_and_a_version_1_bundle_imports(
    keyed: RunningGateway, conn: Connection, nats_url: str, namespace: str, tmp_path: Path
) -> None:
    v1 = json.loads(V1.read_text())
    async with (
        InProcessExecutor(nats_url, namespace, settings={"working_root": tmp_path}),
        keyed.client(BOB) as bob,
    ):
        for body, status in (
            (b"not json", 422),
            (json.dumps({"format": "something else", "version": 2}).encode(), 422),
            (json.dumps({**v1, "version": 99}).encode(), 422),
            (
                json.dumps(
                    {**v1, "outputs": {"outputs/t_01OTHERTRACE0000000000000/x": "eA=="}}
                ).encode(),
                422,
            ),
            (b"x" * 2_100_000, 413),
            (b'{"format": ' + b"[" * 200_000 + b"]" * 200_000 + b"}", 422),  # nested too deep
            *(  # a file named past its trace, or with what a workspace key cannot hold
                (
                    json.dumps(
                        {**v1, "outputs": {f"outputs/{v1['root']}/{name}": "eA=="}}
                    ).encode(),
                    422,
                )
                for name in ("../../uploads/t_01OTHERTRACE0000000000000/x", "a*b", "a b", "x/./y")
            ),
        ):
            refused = await bob.post("/api/traces/import", content=body)
            assert refused.status_code == status, refused.text
            assert refused.json()["error"]["message"]

        async with AsyncClient(keyed.url, BOB) as client:  # the SDK's way in
            new = (await client.import_trace(V1.read_bytes())).trace_id
            assert json.loads(await client.export_trace(new))["version"] == 2
        view = (await bob.get(f"/api/traces/{new}")).json()
        assert view["status"] == "completed"
        messages = (await bob.get(f"/api/traces/{new}/messages")).json()["messages"]
        assert messages[-1]["content"] == "the answer, from an older longhaul"
        output = await bob.get(f"/api/traces/{new}/outputs/call_1")
        assert output.status_code == 200 and output.content == b"an output"
        # the owner the file claimed is not the importer's: the importer owns it all the same
        assert (await wait_for_trace(EventStore(conn), new)).owner == owner_of(BOB)


def _spawning(*events: dict[str, Any]) -> tuple[dict[str, Any], str]:
    """The version 1 fixture with ``events`` after its root's tool call; and its root."""
    bundle = json.loads(V1.read_text())
    root = bundle["root"]
    envelope = {"aggregate_id": root, "ts": 1700000001.5, "actor": "executor:e", "n": 3}
    crafted = [
        {**envelope, "id": f"01M8EPV29WVAATGRF3B7D3ZRK{i}", **e} for i, e in enumerate(events)
    ]
    bundle["traces"][root][2:2] = crafted
    return bundle, root


def _naming(victim: str) -> bytes:
    """A bundle whose root spawned ``victim`` (and continues it), and whose second trace
    claims ``victim`` as its parent and root."""
    spawn = {"type": "subtrace_spawned", "child_trace_id": victim, "tool_call_id": "call_1"}
    bundle, root = _spawning({**spawn, "continue_from": victim, "task": "x"})
    orphan = "t_01JD5V1F1XTVRE0000000000CD"
    bundle["traces"][orphan] = [
        {
            **bundle["traces"][root][0],
            "aggregate_id": orphan,
            "id": "01M8EPV29WVAATGRF3B7D3ZRJD",
            "parent_trace_id": victim,
            "root_trace_id": victim,
            "schedule_id": "sched_01JD5V1F1XTVRE0000000000",
            "trigger_id": "trg_" + "0" * 32,
        }
    ]
    return json.dumps(bundle).encode()


async def _append_as_import(store: EventStore, trace_id: str, *events: ev.TraceEvent) -> None:
    state = await trace_state(store, trace_id)
    position = Position(state.stream_seq, state.version)
    await store.append("trace", trace_id, list(events), expected=position, actor=IMPORT_ACTOR)


def _found(root: Path, name: str) -> list[Path]:
    return list(root.rglob(name))


def _uploading(key: str) -> bytes:
    """A bundle with a second trace, never run, whose pending upload's bytes are at ``key``
    (named nowhere else, so no id in it is one the bundle knows)."""
    bundle = json.loads(V1.read_text())
    trace = "t_01JD5V1F1XTVRE0000000000GH"
    created = {**bundle["traces"][bundle["root"]][0], "aggregate_id": trace}
    upload = {
        **{k: created[k] for k in ("aggregate_id", "ts", "actor")},
        "type": "file_uploaded",
        "id": "01M8EPV29WVAATGRF3B7D3ZRJE",
        "n": 2,
        "name": "stolen.txt",
        "size": 14,
        "sha256": "0" * 64,
        "key": key,
    }
    bundle["traces"][trace] = [{**created, "id": "01M8EPV29WVAATGRF3B7D3ZRJF"}, upload]
    return json.dumps(bundle).encode()


async def test_a_bundle_naming_another_keys_trace_never_reaches_it(
    keyed: RunningGateway, conn: Connection, nats_url: str, namespace: str, tmp_path: Path
) -> None:
    """Bob knows Alice's trace id and imports a bundle whose root spawned it and whose other
    trace claims it as parent: the ids are fresh ones that name nothing, so Bob's view,
    export and delete of his import never show, carry or erase Alice's trace."""
    async with (
        InProcessExecutor(nats_url, namespace, settings={"working_root": tmp_path}),
        keyed.client(ALICE) as alice,
        keyed.client(BOB) as bob,
    ):
        made = await alice.post(
            "/api/traces",
            json={"messages": [user_message("mine")], "model": "scripted:auto", "name": "a"},
        )
        victim = made.json()["trace_id"]
        assert (await wait_for_trace(EventStore(conn), victim, within=DEADLINE_S)).is_final
        workspace = WorkspaceStore(conn)
        await workspace.put(f"outputs/{victim}/call_9", b"alice's secret")
        upload = f"uploads/{victim}/{'0' * 64}"
        await workspace.put(upload, b"alice's upload")

        imported = await bob.post("/api/traces/import", content=_naming(victim))
        assert imported.status_code == 201, imported.text
        new = imported.json()["trace_id"]
        for trace_id in imported.json()["traces"].values():
            view = await bob.get(f"/api/traces/{trace_id}")
            assert view.status_code == 200 and victim not in view.text
            assert view.json()["schedule_id"] is view.json()["trigger_id"] is None
        exported = await bob.get(f"/api/traces/{new}/export")
        assert exported.status_code == 200 and victim not in exported.text
        assert {t["trace_id"] for t in exported.json()["traces"]} == {new}
        assert (await bob.delete(f"/api/traces/{new}")).status_code == 200
        assert (await alice.get(f"/api/traces/{victim}")).status_code == 200
        assert await workspace.get(f"outputs/{victim}/call_9") is not None
        assert "YWxpY2UncyBzZWNyZXQ" not in exported.text  # the output, in base64

        # an upload naming Alice's bytes: its trace runs at once, the upload is never delivered
        stolen = await bob.post("/api/traces/import", content=_uploading(upload))
        assert stolen.status_code == 201, stolen.text
        [runs] = [t for t in stolen.json()["traces"].values() if t != stolen.json()["trace_id"]]
        ran = await wait_for_trace(EventStore(conn), runs, within=DEADLINE_S)
        assert ran.is_final and not await asyncio.to_thread(_found, tmp_path, "stolen.txt")

        # and were a log to name Alice's trace as a child all the same (written here as an
        # import writes, which wakes nobody), the family walk of export and erasure leaves it
        # out: it does not name that log's trace as its parent
        root = stolen.json()["trace_id"]
        store = EventStore(conn)
        again = ev.RunRequested(messages=[ev.InputMessage(role="user", content="more")])
        spawned = ev.SubtraceSpawned(child_trace_id=victim, tool_call_id="call_1", task="x")
        await _append_as_import(store, root, again, spawned)
        view = (await bob.get(f"/api/traces/{root}")).json()
        assert [child["trace_id"] for child in view["sub_traces"]] == [victim]
        exported = await bob.get(f"/api/traces/{root}/export")
        assert exported.status_code == 200 and "mine" not in exported.text
        assert [t["trace_id"] for t in exported.json()["traces"]] == [root]
        assert (await bob.delete(f"/api/traces/{root}")).status_code == 200
        assert (await alice.get(f"/api/traces/{victim}")).status_code == 200


async def test_a_bundle_claiming_a_remote_child_never_reads_it(
    nats_config: NatsConfig, monkeypatch: pytest.MonkeyPatch, nats_url: str, namespace: str,
    tmp_path: Path,
) -> None:  # fmt: skip
    """Every key's remote children live on the remote under this gateway's one key: Bob's
    bundle claiming ``agent://remote/<Alice's child>`` as his root's remote child gets no
    link, so the remote-trace routes answer him as for an unknown id."""
    monkeypatch.setenv("LH_BUNDLE_REMOTE_KEY", ALICE)
    async with serve_gateway(gateway_config(nats_config, api_keys=ALICE)) as far:
        remote = {"far": RemoteAgentConfig(url=far.url, api_key_env="LH_BUNDLE_REMOTE_KEY")}
        config = gateway_config(nats_config, api_keys=f"{ALICE},{BOB}")
        config.remote_agents = remote
        async with (
            serve_gateway(config) as near,
            InProcessExecutor(nats_url, namespace, settings={"working_root": tmp_path}),
            near.client(BOB) as bob,
            far.client(ALICE) as alice,
        ):
            made = await alice.post(
                "/api/traces", json={"messages": [user_message("mine")], "name": "a"}
            )
            child = f"agent://{httpx.URL(far.url).netloc.decode()}/{made.json()['trace_id']}"
            spawn = {"type": "subtrace_spawned", "child_trace_id": "t_01JD5V1F1XTVRE000000000EF"}
            bundle, _ = _spawning(
                {**spawn, "tool_call_id": "call_1", "remote": "far", "task": "x"},
                {**spawn, "type": "remote_subtrace_linked", "remote_id": child},
            )
            imported = await bob.post("/api/traces/import", content=json.dumps(bundle))
            assert imported.status_code == 201, imported.text
            new = imported.json()["trace_id"]
            assert child not in (await bob.get(f"/api/traces/{new}")).text
            unknown = await bob.get(child.replace("agent://", "/api/traces/agent://") + "0")
            for suffix in ("", "/messages", "/events?follow=false"):
                answer = await bob.get(child.replace("agent://", "/api/traces/agent://") + suffix)
                assert answer.status_code == unknown.status_code == 404, answer.text
                assert answer.json()["error"]["code"] == unknown.json()["error"]["code"]


async def test_an_import_s_uploads_count_toward_the_key_s_upload_quota(
    nats_config: NatsConfig,
) -> None:
    """Uploads carried in a bundle are the importer's uploads: over the key's quota, 413
    before anything is stored (an import was a way around the quota)."""
    v1 = json.loads(V1.read_text())
    v1["outputs"][f"uploads/{v1['root']}/{'0' * 64}"] = base64.b64encode(b"u" * 1500).decode()
    config = gateway_config(nats_config, api_keys=BOB, upload_quota_bytes_per_key=1000)
    async with serve_gateway(config) as gateway, gateway.client(BOB) as bob:
        refused = await bob.post("/api/traces/import", content=json.dumps(v1))
        assert refused.status_code == 413, refused.text
        assert refused.json()["error"]["code"] == "upload_quota_exceeded"


def _with_contexts(named: int, unnamed: int, size: int = 300_000) -> tuple[bytes, list[bytes], int]:
    """The version 1 fixture as a version 2 bundle with ``named + unnamed`` context files of
    random prompts (past the KV's inline limit: objects), the first ``named`` recorded by its
    log; each file's prompt; the bytes of the named ones."""
    v1 = json.loads(V1.read_text())
    root = v1["root"]
    events = v1["traces"][root]
    prompts = [os.urandom(size // 2).hex().encode() for _ in range(named + unnamed)]
    blobs = [
        json.dumps({"system_prompt": p.decode(), "tools": [], "preset": "x"}).encode()
        for p in prompts
    ]
    digests = [hashlib.sha256(b).hexdigest() for b in blobs]
    envelope = {k: events[0][k] for k in ("aggregate_id", "ts", "actor")}
    recorded = [
        {**envelope, "type": "context_recorded", "id": f"01M8EPV29WVAATGRF3B7D3ZRC{i}", "n": 2}
        | {"hash": digest, "preset": "default"}
        for i, digest in enumerate(digests[:named])
    ]
    files = [{"kind": "outputs", "key": k, "data": v} for k, v in v1["outputs"].items()]
    files += [
        {"kind": "context", "key": d, "data": base64.b64encode(b).decode()}
        for d, b in zip(digests, blobs, strict=True)
    ]
    bundle = {
        "format": "longhaul.trace-bundle",
        "version": 2,
        "exported_at": 0.0,
        "root": root,
        "traces": [{"trace_id": root, "events": [events[0], *recorded, *events[1:]]}],
        "files": files,
    }
    return json.dumps(bundle).encode(), prompts, sum(map(len, blobs[:named]))


async def _charged(conn: Connection, key: str) -> int:
    entry = await WorkspaceStore(conn).get(f"quota/uploads/{owner_of(key)}")
    return 0 if entry is None else int(entry.value)


OUTPUT_BYTES = len(b"an output")


async def test_an_import_stores_only_what_its_delete_removes_and_charges_all_of_it(
    nats_config: NatsConfig, conn: Connection, nats_url: str, namespace: str, tmp_path: Path
) -> None:
    """Bob imports contexts to fill the store for everyone: over his quota nothing is stored;
    within it the files no log names are not stored, the rest is charged to him, and his
    delete of the import leaves none of their bytes in any stream."""
    config = gateway_config(
        nats_config,
        api_keys=f"{ALICE},{BOB}",
        max_upload_bytes=4_000_000,
        upload_quota_bytes_per_key=1_000_000,
    )
    over, over_blobs, _ = _with_contexts(named=4, unnamed=0)
    bundle, blobs, named_bytes = _with_contexts(named=3, unnamed=2)
    needles = [b[:64] for b in [*over_blobs, *blobs]]
    async with (
        serve_gateway(config) as gateway,
        InProcessExecutor(nats_url, namespace, settings={"working_root": tmp_path}),
        gateway.client(BOB) as bob,
    ):
        refused = await bob.post("/api/traces/import", content=over)
        assert refused.status_code == 413, refused.text
        assert await holding_bytes(conn, needles) == []
        assert await _charged(conn, BOB) == 0

        imported = await bob.post("/api/traces/import", content=bundle)
        assert imported.status_code == 201, imported.text
        trace_id = imported.json()["trace_id"]
        held = await holding_bytes(conn, needles)
        assert {stream for stream, _ in held} == {f"OBJ_{conn.names.artifacts}"}
        assert len(held) == 3  # the named ones' first chunks; the unnamed ones nowhere
        assert not any(b[:64] in str(held).encode() for b in blobs[3:])
        assert await _charged(conn, BOB) == named_bytes + OUTPUT_BYTES
        context = await bob.get(f"/api/traces/{trace_id}/context")
        assert context.status_code == 200, context.text

        assert (await bob.delete(f"/api/traces/{trace_id}")).status_code == 200
        assert await holding_bytes(conn, needles) == []


async def test_an_import_no_executor_wrote_leaves_no_file_and_no_charge(
    nats_config: NatsConfig, conn: Connection
) -> None:
    """Refused by the executor, or no executor there at all: nothing of it stays."""
    config = gateway_config(nats_config, api_keys=BOB, max_upload_bytes=4_000_000)
    bundle, blobs, _ = _with_contexts(named=2, unnamed=0)
    needles = [b[:64] for b in blobs]
    async with serve_gateway(config) as gateway, gateway.client(BOB) as bob:
        nobody = await bob.post("/api/traces/import", content=bundle)
        assert nobody.status_code == 503, nobody.text
        assert await holding_bytes(conn, needles) == []
        assert await _charged(conn, BOB) == 0

        async def refuse(msg: Msg) -> None:  # an executor that refuses every import
            await msg.respond(msgspec.json.encode(ImportReply(error="refused")))

        sub = await conn.nc.subscribe(conn.names.imports, cb=refuse)
        try:
            refused = await bob.post("/api/traces/import", content=bundle)
        finally:
            await sub.unsubscribe()
        assert refused.status_code == 422, refused.text
        assert "refused" in refused.json()["error"]["message"]
        assert await holding_bytes(conn, needles) == []
        assert await _charged(conn, BOB) == 0
