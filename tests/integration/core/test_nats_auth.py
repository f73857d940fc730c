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
from longhaul.core.config import LonghaulConfig, NatsConfig
from longhaul.core.connection import Connection, connect
from longhaul.core.erasure import Eraser
from longhaul.core.index import TraceIndex
from longhaul.core.nats_server import NatsServer
from longhaul.core.provision import ProvisionSettings
from longhaul.core.store import EventStore, Position
from longhaul.core.workspace import WorkspaceStore
from longhaul.domain import events as ev
from longhaul.domain.ids import new_id
from longhaul.domain.imports import ImportedTrace, ImportReply, ImportRequest
from longhaul.domain.liveness import dead_key
from longhaul.domain.names import Names
from longhaul.domain.permissions import ADMIN_USER, BUCKET_WRITES, WRITES, Bucket
from longhaul.executor.settings import ExecutorSettings
from nats.aio.msg import Msg
from nats.js.errors import NotFoundError
from pydantic import SecretStr

from tests.support.stack import InProcessExecutor

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
        # the executor writes what its turns write: an imported log, which holds every
        # trace event, is written under the import writer's user
        ("executor", ev.TaskCompleted),
        ("executor", ev.PlanCreated),
        ("executor", ev.VerificationPassed),
        ("executor", ev.FileUploaded),
        ("executor", ev.ReflectRequested),
        ("importer", ev.TaskCompleted),
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


@pytest.mark.parametrize("user", ["gateway", "planner", "executor", "verifier", "importer"])
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
        ("importer", "workspace"),  # an import's files are the gateway's to store
        ("importer", "snapshots"),
        # a leaked credential cannot open a provider's circuit and steer every trace away
        ("gateway", "circuits"),
        ("verifier", "circuits"),
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


@pytest.mark.parametrize(
    "user", ["gateway", "planner", "executor", "verifier", "supervisor", "importer"]
)
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


@pytest.mark.parametrize("import_user", [True, False])
async def test_an_executor_writes_an_imported_log_only_under_the_import_writer_s_user(
    credentials_and_url: tuple[dict, str], admin: Connection, tmp_path: Path, import_user: bool
) -> None:
    """An executor as ``longhaul up`` starts it (its own user, the import writer's for its
    second connection) writes an imported log holding events it never writes itself; the
    executor's user alone cannot (the log stays empty, the gateway hears the refusal)."""
    credentials, url = credentials_and_url
    settings: dict[str, object] = {"working_root": tmp_path}
    if import_user:
        settings |= {"import_user": "importer", "import_password": credentials["importer"]}
    # a refused append is not waited out as a broker that is away
    nats_config = as_user(url, credentials, "executor").model_copy(
        update={"unavailable_retry_s": 0.5}
    )
    config = LonghaulConfig(nats=nats_config)
    trace_id = new_id("t")
    log = [
        ev.TraceCreated(messages=[], config=ev.TraceConfig(), owner="k_imp"),
        ev.FileUploaded(name="a.txt", size=1, sha256="0" * 64, key=f"uploads/{trace_id}/a"),
        ev.Completed(summary="done"),
    ]
    stamped = [msgspec.structs.replace(e, aggregate_id=trace_id, n=n) for n, e in enumerate(log, 1)]
    request = ImportRequest(
        owner="k_imp",
        traces=[
            ImportedTrace(trace_id=trace_id, events=[msgspec.Raw(ev.encode(e)) for e in stamped])
        ],
    )
    gateway = await connect(as_user(url, credentials, "gateway"))
    try:
        async with InProcessExecutor(url, "", "exec-auth", config=config, settings=settings):
            answer = await gateway.nc.request(
                NAMES.imports, msgspec.json.encode(request), timeout=30
            )
    finally:
        await gateway.close()
    reply = msgspec.json.decode(answer.data, type=ImportReply)
    written = [r.event.type async for r in EventStore(admin).replay("trace", trace_id)]
    if import_user:
        assert reply.error is None
        assert written == ["trace_created", "file_uploaded", "completed"]
    else:
        assert reply.error is not None
        assert "file_uploaded" not in written


def test_an_executor_deployed_by_up_or_nats_auth_gets_the_import_writer_s_user(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``longhaul up`` (``service_env``) and ``longhaul nats-auth`` (``executor.env``) give
    the executor the import writer's user; no process runs as it alone."""
    written = nats_auth.write_deployment(tmp_path, NAMES)
    credentials, _ = nats_auth.load_or_create(tmp_path)
    assert "importer.env" not in {path.name for path in written}
    env_file = (tmp_path / "executor.env").read_text()
    for key, value in nats_auth.service_env(credentials, "executor").items():
        assert f"{key}={value}\n" in env_file
        monkeypatch.setenv(key, value)
    settings = ExecutorSettings()
    assert settings.import_user == "importer" and settings.import_password is not None
    assert settings.import_password.get_secret_value() == credentials["importer"]
