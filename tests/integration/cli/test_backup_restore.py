"""A backup of a running ``longhaul up`` restores everything into a fresh one
(``longhaul up --restore DIR``): a schedule that ticks again, a trigger whose secret still
signs, a notification record, an experience, an eval, a trace with its working files. The
backup holds every stream the server has (enumerated from the server, so a bucket added later
and left out fails here); a restore over the running stack is refused, and a damaged or
unfinished backup is refused before anything changes."""

from __future__ import annotations

import asyncio
import json
import shutil
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
from longhaul.core.backup import server_streams
from longhaul.core.config import NatsConfig
from longhaul.core.connection import Connection, connect
from longhaul.core.notification_records import NotificationRecords
from longhaul.core.store import EventStore
from longhaul.domain import events as ev
from pydantic import SecretStr

from tests.integration.cli.harness import LONGHAUL, Result, cli_env, running_up
from tests.integration.executor.scripts import write_script
from tests.integration.gateway.harness import user_message
from tests.integration.gateway.test_schedules import signed
from tests.support.kv import kv_until
from tests.support.stack import wait_for_trace
from tests.support.webhook_receiver import webhook_receiver

KEY = "backup-key-0123456789abcdef"
DEADLINE_S = 60.0
SUITE: dict[str, Any] = {"name": "kept", "tasks": [{"id": "one", "prompt": "p", "answer": "ok"}]}
TEMPLATE = {"kind": "trace", "body": {"messages": [user_message("tick")], "model": "scripted:auto"}}


async def run(*args: str, env: dict[str, str]) -> Result:
    """A ``longhaul`` command that talks to NATS (no gateway URL)."""
    process = await asyncio.create_subprocess_exec(
        LONGHAUL, *args, env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    async with asyncio.timeout(DEADLINE_S):
        out, err = await process.communicate()
    return Result(process.returncode or 0, out.decode(), err.decode())


def admin_of(data_dir: Path) -> NatsConfig:
    """The operator's NATS user of a running ``up`` (its ``up.json`` and credentials)."""
    state = json.loads((data_dir / "up.json").read_text())
    password = json.loads(Path(state["nats_credentials"]).read_text())["admin"]
    return NatsConfig(url=state["nats"], user="admin", password=SecretStr(password))


def operator_env(base: dict[str, str], nats: NatsConfig, data_dir: Path) -> dict[str, str]:
    assert nats.password is not None
    return {
        **base,
        "LONGHAUL_NATS__URL": nats.url,
        "LONGHAUL_NATS__USER": "admin",
        "LONGHAUL_NATS__PASSWORD": nats.password.get_secret_value(),
        "LONGHAUL_DATA_DIR": str(data_dir),  # the working files: <data-dir>/work
    }


@asynccontextmanager
async def admin(data_dir: Path) -> AsyncIterator[Connection]:
    conn = await connect(admin_of(data_dir))
    try:
        yield conn
    finally:
        await conn.close()


async def next_scheduled_run(conn: Connection, schedule_id: str) -> str:
    """The id of the next trace the schedule starts, seen as its creation lands."""
    found: asyncio.Future[str] = asyncio.get_running_loop().create_future()

    async def created(msg: Any) -> None:
        event = ev.decode(msg.data)
        if getattr(event, "schedule_id", None) == schedule_id and not found.done():
            found.set_result(conn.names.parse_subject(msg.subject)[1])

    sub = await conn.nc.subscribe(conn.names.type_filter("trace", "trace_created"), cb=created)
    try:
        return await asyncio.wait_for(found, DEADLINE_S)
    finally:
        await sub.unsubscribe()


async def test_a_backup_of_a_running_up_restores_everything_into_a_fresh_one(
    tmp_path: Path,
) -> None:
    first, second, saved = tmp_path / "first", tmp_path / "second", tmp_path / "backup"
    write = {"name": "write", "arguments": {"path": "notes/kept.txt", "content": "KEPT"}}
    model = write_script(tmp_path / "write.yaml", [{"tool_calls": [write]}, {"content": "done"}])
    with webhook_receiver() as receiver:
        hook = {"name": "ops", "url": f"{receiver.url}/ops", "retry_base_s": 0.2}
        env = cli_env(LONGHAUL_API_KEYS=KEY, LONGHAUL_NOTIFY=json.dumps([hook]))
        auth = {"Authorization": f"Bearer {KEY}"}
        async with (
            running_up(first, env) as url,
            httpx.AsyncClient(base_url=url, headers=auth, timeout=10) as client,
            admin(first) as conn,
        ):
            body = {"messages": [user_message("keep a note")], "model": model}
            trace_id = (await client.post("/api/traces", json=body)).json()["trace_id"]
            trace = await wait_for_trace(EventStore(conn), trace_id, within=DEADLINE_S)
            assert trace.status == "completed"
            # the notifier writes a delivery's record after the receiver's answer
            await kv_until(
                conn,
                conn.names.notifications,
                f"{trace_id}.>",
                lambda value: json.loads(value).get("status") == "delivered",
                within=DEADLINE_S,
            )
            notified = await NotificationRecords(conn).of_run(trace_id)
            assert notified
            # overlap "allow": a run restored as running does not hold the next ticks back
            every = {"name": "often", "every_s": 1, "overlap": "allow", "template": TEMPLATE}
            schedule = (await client.post("/api/schedules", json=every)).json()
            trigger = (
                await client.post("/api/triggers", json={"name": "hook", "template": TEMPLATE})
            ).json()
            experience = await client.post(
                "/api/experiences", json={"category": "tool_usage", "content": "grep first"}
            )
            assert experience.status_code == 201, experience.text
            made = await client.post(
                "/api/evals", json={"suite": SUITE, "models": ["scripted:auto"]}
            )
            assert made.status_code == 201, made.text
            eval_id = made.json()["eval_id"]
            await next_scheduled_run(conn, schedule["schedule_id"])  # it ticks here

            ops = operator_env(env, admin_of(first), first)
            backed = await run("backup", str(saved), env=ops)  # while it all runs
            assert backed.code == 0, backed.output
            in_backup = {p.stem for p in saved.glob("*.json")} - {"backup"}  # <stream>.json
            on_server = set(await server_streams(conn))
            assert on_server - in_backup == set(), "streams the backup left out"
            manifest = json.loads((saved / "backup.json").read_text())
            assert manifest["workdir"]["files"] >= 1 and manifest["workdir"]["skipped"] == []

            # the services are running: replacing their streams under them is refused
            refused = await run("restore", str(saved), "--replace", env=ops)
            assert refused.code == 1 and "services are running" in refused.stderr
            assert "executor" in refused.stderr, refused.stderr
            assert "longhaul up (pid" in refused.stderr  # its up.json names a live process
            assert set(await server_streams(conn)) == on_server
            before = {
                "messages": (await client.get(f"/api/traces/{trace_id}/messages")).json(),
                "experiences": (await client.get("/api/experiences")).json(),
                "eval": (await client.get(f"/api/evals/{eval_id}")).json(),
                "triggers": (await client.get("/api/triggers")).json(),
            }

        async with (
            running_up(second, env, args=("--restore", str(saved))) as url,
            httpx.AsyncClient(base_url=url, headers=auth, timeout=10) as client,
            admin(second) as conn,
        ):
            assert (await client.get(f"/api/traces/{trace_id}")).json()["status"] == "completed"
            assert (await client.get(f"/api/traces/{trace_id}/messages")).json() == before[
                "messages"
            ]
            assert (await client.get("/api/experiences")).json() == before["experiences"]
            assert (await client.get(f"/api/evals/{eval_id}")).json() == before["eval"]
            assert (await client.get("/api/triggers")).json() == before["triggers"]
            kept = await client.get(f"/api/traces/{trace_id}/notifications")
            assert [d["delivery_id"] for d in kept.json()["items"]] == [
                d.delivery_id for d in notified
            ]
            files = list((second / "work").rglob("kept.txt"))
            assert [f.read_text() for f in files] == ["KEPT"]
            assert files[0].parent.name == "notes"
            # the schedule ticks again, and the trigger's secret still signs
            await next_scheduled_run(conn, schedule["schedule_id"])
            payload = b'{"x": 1}'
            hooked = await client.post(
                trigger["url"], content=payload, headers=signed(trigger["secret"], payload)
            )
            assert hooked.status_code == 202, hooked.text
            forged = await client.post(
                trigger["url"], content=payload, headers=signed("whsec_x", payload)
            )
            assert forged.status_code == 401

            # a damaged or unfinished backup is refused before anything changes, even forced
            ops = operator_env(env, admin_of(second), second)
            streams = set(await server_streams(conn))
            damaged = tmp_path / "damaged"
            shutil.copytree(saved, damaged)
            events = next(damaged.glob("*LH_EVENTS.tar.s2"))
            data = bytearray(events.read_bytes())
            data[len(data) // 2] ^= 0xFF
            events.write_bytes(bytes(data))
            result = await run("restore", str(damaged), "--replace", "--force", env=ops)
            assert result.code == 1 and f"{events.name} does not match its SHA-256" in result.stderr
            (damaged / "backup.json").unlink()
            result = await run("restore", str(damaged), "--replace", "--force", env=ops)
            assert result.code == 1 and "did not finish" in result.stderr, result.stderr
            assert set(await server_streams(conn)) == streams
            assert (await client.get(f"/api/traces/{trace_id}")).status_code == 200

    # a data dir that holds a deployment already is not restored over without --replace
    up = ("up", "--port", "0", "--nats-port", "0", "--data-dir", str(second))
    again = await run(*up, "--restore", str(saved), env=env)
    assert again.code == 1 and "holds files already" in again.stderr, again.output
    assert "pass --replace" in again.stderr and "stopped." in again.stdout
