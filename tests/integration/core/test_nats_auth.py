"""An authenticated nats-server as ``longhaul up`` runs it, tried as an attacker would: no
credentials, a wrong password, and a service's real credentials used to forge events that
service never writes. Each refusal is observed on the server's own answer (the client's error
callback) and on the stream, which must not hold the forged event."""

from __future__ import annotations

import asyncio
import stat
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import msgspec
import nats
import pytest
from longhaul.cli.supervisor import ChildSpec
from longhaul.cli.up import ExitReporter
from longhaul.core import nats_auth
from longhaul.core.connection import Connection, connect
from longhaul.core.erasure import Eraser
from longhaul.core.index import TraceIndex
from longhaul.core.nats_server import NatsServer
from longhaul.core.provision import ProvisionSettings
from longhaul.core.store import EventStore, Position
from longhaul.core.workspace import WorkspaceStore
from longhaul.domain import events as ev
from longhaul.domain.config import LonghaulConfig, NatsConfig
from longhaul.domain.liveness import dead_key
from longhaul.domain.names import Names
from longhaul.domain.permissions import ADMIN_USER, BUCKET_WRITES, WRITES, Bucket
from nats.aio.msg import Msg
from nats.js.errors import NotFoundError
from pydantic import SecretStr

DEADLINE_S = 10.0
NAMES = Names()


@pytest.fixture(scope="module")
def credentials_and_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[dict, str]]:
    root = tmp_path_factory.mktemp("nats-auth")
    credentials, _ = nats_auth.load_or_create(root)
    block = nats_auth.authorization_block(credentials, NAMES)
    with NatsServer(root / "js", port=0, authorization=block) as server:
        yield credentials, server.url


def as_user(url: str, credentials: dict, user: str) -> NatsConfig:
    return NatsConfig(url=url, user=user, password=SecretStr(credentials[user]))


@pytest.fixture
async def admin(credentials_and_url: tuple[dict, str]) -> AsyncIterator[Connection]:
    credentials, url = credentials_and_url
    conn = await connect(
        as_user(url, credentials, ADMIN_USER), provision_settings=ProvisionSettings()
    )
    yield conn
    await conn.close()


class Refusals:
    """Collects the server's permission errors for one client connection."""

    def __init__(self) -> None:
        self.errors: list[str] = []
        self.arrived = asyncio.Event()

    async def on_error(self, exc: Exception) -> None:
        self.errors.append(str(exc))
        self.arrived.set()


async def connect_raw(url: str, credentials: dict, user: str, refusals: Refusals) -> nats.NATS:
    return await nats.connect(
        url,
        user=user,
        password=credentials[user],
        error_cb=refusals.on_error,
        allow_reconnect=False,
        connect_timeout=DEADLINE_S,
    )


def event_bytes(kind: type[ev.Event], aggregate_id: str) -> bytes:
    """A minimal payload: a permission check looks at the subject only."""
    return msgspec.json.encode({"type": kind.__struct_config__.tag, "aggregate_id": aggregate_id})


async def test_a_client_without_credentials_is_refused(
    credentials_and_url: tuple[dict, str],
) -> None:
    _, url = credentials_and_url
    with pytest.raises(nats.errors.Error, match=r"(?i)authorization"):
        await nats.connect(url, allow_reconnect=False, connect_timeout=DEADLINE_S)


async def test_a_wrong_password_is_refused(credentials_and_url: tuple[dict, str]) -> None:
    credentials, url = credentials_and_url
    with pytest.raises(nats.errors.Error, match=r"(?i)authorization"):
        await nats.connect(
            url,
            user="gateway",
            password=credentials["gateway"] + "x",
            allow_reconnect=False,
            connect_timeout=DEADLINE_S,
        )


@pytest.mark.parametrize(
    ("user", "forged"),
    [
        ("gateway", ev.Completed),
        ("gateway", ev.MessageAppended),
        ("gateway", ev.VerificationPassed),
        ("verifier", ev.Completed),
        ("planner", ev.MessageAppended),
        # the executor may write every trace event (an imported log holds them all,
        # ``permissions.IMPORTED``), but never a task's
        ("executor", ev.TaskCompleted),
        ("executor", ev.PlanCreated),
        ("supervisor", ev.TraceCreated),
    ],
)
async def test_a_service_cannot_publish_events_it_never_writes(
    credentials_and_url: tuple[dict, str],
    admin: Connection,
    user: str,
    forged: type[ev.Event],
) -> None:
    credentials, url = credentials_and_url
    refusals = Refusals()
    nc = await connect_raw(url, credentials, user, refusals)
    aggregate_id = f"forged-{user}"
    subject = NAMES.subject(forged.aggregate, aggregate_id, str(forged.__struct_config__.tag))
    try:
        await nc.publish(subject, event_bytes(forged, aggregate_id))
        await nc.flush(timeout=int(DEADLINE_S))
        await asyncio.wait_for(refusals.arrived.wait(), timeout=DEADLINE_S)
    finally:
        await nc.close()
    assert any("permissions violation" in e.lower() and subject in e for e in refusals.errors)
    with pytest.raises(NotFoundError):
        await admin.js.get_last_msg(NAMES.stream, subject)


@pytest.mark.parametrize("user", ["gateway", "planner", "executor", "verifier"])
async def test_a_service_can_publish_every_event_it_writes(
    credentials_and_url: tuple[dict, str], admin: Connection, user: str
) -> None:
    credentials, url = credentials_and_url
    conn = await connect(as_user(url, credentials, user))
    try:
        for kind in WRITES[user]:  # type: ignore[index]
            aggregate_id = f"allowed-{user}"
            subject = NAMES.subject(kind.aggregate, aggregate_id, str(kind.__struct_config__.tag))
            ack = await conn.js.publish(subject, event_bytes(kind, aggregate_id))
            assert ack.stream == NAMES.stream
    finally:
        await conn.close()


def test_credentials_are_owner_only_and_survive_a_restart(tmp_path: Path) -> None:
    first, path = nats_auth.load_or_create(tmp_path)
    again, _ = nats_auth.load_or_create(tmp_path)
    assert again == first
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert len(set(first.values())) == len(first)  # one password per user


@pytest.mark.parametrize(
    ("user", "bucket"),
    [
        ("verifier", "leases"),  # allowed: its ledger (the check below is for the others)
        ("gateway", "snapshots"),
        ("gateway", "leases"),
        ("planner", "traces"),
        ("planner", "leases"),
        ("verifier", "traces"),
        ("verifier", "experiences"),
        ("verifier", "artifacts"),
        ("supervisor", "workspace"),
        ("supervisor", "traces"),
        ("executor", "evals"),  # a run cannot forge its own score or check outcome
        ("planner", "evals"),
    ],
)
async def test_a_service_writes_only_its_own_buckets(
    credentials_and_url: tuple[dict, str], admin: Connection, user: str, bucket: Bucket
) -> None:
    """A leaked credential is tried on a bucket its service never writes: the server refuses
    the KV put (or object chunk) and the bucket does not hold it."""
    credentials, url = credentials_and_url
    allowed = bucket in BUCKET_WRITES[user]  # type: ignore[index]
    refusals = Refusals()
    nc = await connect_raw(url, credentials, user, refusals)
    name = getattr(NAMES, bucket)
    subject = f"$O.{name}.C.forged-{user}" if bucket == "artifacts" else f"$KV.{name}.forged-{user}"
    try:
        if allowed:
            await nc.jetstream().publish(subject, b"mine", timeout=DEADLINE_S)
        else:
            await nc.publish(subject, b"forged")
            await nc.flush(timeout=int(DEADLINE_S))
            await asyncio.wait_for(refusals.arrived.wait(), timeout=DEADLINE_S)
    finally:
        await nc.close()
    stream = f"OBJ_{name}" if bucket == "artifacts" else f"KV_{name}"
    if allowed:
        assert (await admin.js.get_last_msg(stream, subject)).data == b"mine"
        return
    refused = [e for e in refusals.errors if "permissions violation" in e.lower()]
    assert any(subject.lower() in e.lower() for e in refused), refusals.errors
    with pytest.raises(NotFoundError):
        await admin.js.get_last_msg(stream, subject)


@pytest.mark.parametrize("user", ["gateway", "planner", "executor", "verifier", "supervisor"])
async def test_a_service_can_write_every_bucket_it_needs(
    credentials_and_url: tuple[dict, str], admin: Connection, user: str
) -> None:
    credentials, url = credentials_and_url
    conn = await connect(as_user(url, credentials, user))
    try:
        for bucket in BUCKET_WRITES[user]:  # type: ignore[index]
            if bucket == "artifacts":
                objects = await conn.artifacts()
                await objects.put(f"allowed-{user}", b"x" * 300_000)  # chunks and metadata
            else:
                kv = await conn.kv(getattr(NAMES, bucket))
                await kv.put(f"allowed-{user}", b"mine")
                await kv.purge(f"allowed-{user}")
    finally:
        await conn.close()


async def test_the_supervisor_records_a_dead_process_under_its_own_credentials(
    credentials_and_url: tuple[dict, str], admin: Connection
) -> None:
    """``longhaul up``'s exit report (a core publish and a record in ``lh_leases``) as the
    supervisor user: the record lands, which a missing bucket permission would refuse."""
    credentials, url = credentials_and_url
    reporter = ExitReporter(LonghaulConfig(), url)
    reporter.authenticate(credentials)
    spec = ChildSpec(name="verifier", module="longhaul.verifier.main", env={})
    try:
        await reporter(spec, "inc-dead-1", -9)
    finally:
        await reporter.close()
    kv = await admin.kv(NAMES.leases)
    record = await kv.get(dead_key("inc-dead-1"))
    assert record.value is not None and b"inc-dead-1" in record.value


async def test_the_gateway_s_credential_can_erase_a_trace_and_ask_for_its_directory(
    credentials_and_url: tuple[dict, str], admin: Connection
) -> None:
    """Erasure under the gateway's own user (stream and bucket purges through the JetStream
    API, the index tombstone, the object's removal, the request to the executors); another
    service's credential cannot ask the executors to remove a directory."""
    credentials, url = credentials_and_url
    trace_id = "t_erased_by_the_gateway"
    created = ev.TraceCreated(messages=[], config=ev.TraceConfig(), owner="k_erase")
    await EventStore(admin).append("trace", trace_id, [created], expected=Position())
    await (await admin.kv(NAMES.leases)).put(f"trace.{trace_id}", b"held")
    await (await admin.kv(NAMES.snapshots)).put(f"trace.{trace_id}", b"snap")
    await WorkspaceStore(admin).put(f"outputs/{trace_id}/call", b"x" * 300_000)
    executor = await connect(as_user(url, credentials, "executor"))
    asked: list[bytes] = []

    async def answer(msg: Msg) -> None:
        asked.append(msg.data)
        await msg.respond(b'{"removed": true}')

    await executor.nc.subscribe(NAMES.erasures, cb=answer)
    await executor.nc.flush()
    gateway = await connect(as_user(url, credentials, "gateway"))
    try:
        removed = await Eraser(gateway, TraceIndex(gateway)).erase_trace(trace_id)
        await gateway.nc.request(NAMES.erasures, b'{"owner": "k_erase", "scope": "x"}', timeout=5)
    finally:
        await gateway.close()
    assert (removed.events, removed.objects) == (1, 1) and removed.entries >= 3
    info = await admin.js.stream_info(NAMES.stream, subjects_filter=f"lh.ev.trace.{trace_id}.>")
    assert not info.state.subjects
    assert await TraceIndex(admin).get(trace_id) is None
    assert await WorkspaceStore(admin).get(f"outputs/{trace_id}/call") is None
    assert len(asked) == 1
    refusals = Refusals()
    verifier = await connect_raw(url, credentials, "verifier", refusals)
    try:
        await verifier.publish(NAMES.erasures, b'{"owner": "k_erase", "scope": "x"}')
        await verifier.flush(timeout=int(DEADLINE_S))
        await asyncio.wait_for(refusals.arrived.wait(), timeout=DEADLINE_S)
    finally:
        await verifier.close()
        await executor.close()
    assert any("permissions violation" in e.lower() for e in refusals.errors)
    assert len(asked) == 1
