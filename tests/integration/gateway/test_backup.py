"""Backup → wipe → restore through the running stack and the CLI: a trace waiting for a person
is backed up while the services run, its nats-server and disk are thrown away, the backup is
restored into a new empty server, and the trace answers and finishes there."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

import pytest
from longhaul.core.backup import BackupError, restore_all, running_services
from longhaul.core.config import NatsConfig
from longhaul.core.connection import connect
from longhaul.core.nats_server import NatsServer
from longhaul.core.store import EventStore

from tests.integration.executor.scripts import write_script
from tests.integration.gateway.harness import gateway_config, serve_gateway, user_message
from tests.support.nats import unique_namespace
from tests.support.stack import InProcessExecutor, wait_for_trace

DEADLINE_S = 60


async def longhaul(nats: NatsConfig, *args: str) -> tuple[int, str]:
    """The ``longhaul`` command against ``nats``: its exit status and output."""
    env = {
        **os.environ,
        "LONGHAUL_NATS__URL": nats.url,
        "LONGHAUL_NATS__NAMESPACE": nats.namespace,
        "COLUMNS": "200",
    }
    process = await asyncio.create_subprocess_exec(
        str(Path(sys.executable).with_name("longhaul")),
        *args,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    out, _ = await asyncio.wait_for(process.communicate(), DEADLINE_S)
    return process.returncode or 0, out.decode()


async def test_backup_wipe_restore_resumes_a_waiting_trace(tmp_path: Path) -> None:
    model = write_script(
        tmp_path / "ask.yaml",
        [
            {"tool_calls": [{"name": "ask_human", "arguments": {"question": "which colour?"}}]},
            {"content": "blue it is"},
        ],
    )
    namespace = unique_namespace()
    saved = tmp_path / "backup"
    with NatsServer(tmp_path / "first", port=0) as first:
        nats = NatsConfig(url=first.url, namespace=namespace)
        async with (
            serve_gateway(gateway_config(nats)) as gateway,
            InProcessExecutor(first.url, namespace, settings={"working_root": tmp_path / "w"}),
            gateway.client() as client,
        ):
            body = {"messages": [user_message("pick a colour")], "model": model}
            trace_id = (await client.post("/api/traces", json=body)).json()["trace_id"]
            conn = await connect(nats)
            try:
                await wait_for_trace(
                    EventStore(conn), trace_id, lambda s: s.status == "waiting", within=DEADLINE_S
                )
            finally:
                await conn.close()
            before = (await client.get(f"/api/traces/{trace_id}/messages")).json()
            work = ("--workdir", str(tmp_path / "w"))
            code, out = await longhaul(nats, "backup", str(saved), *work)  # while it all runs
            assert code == 0, out
            code, out = await longhaul(nats, "backup", str(saved), *work)
            assert code == 1 and "is not empty" in out  # never over an earlier backup
            conn = await connect(nats)
            try:  # the executor is at work: replacing its streams is refused, unless forced
                assert await running_services(conn)
                with pytest.raises(BackupError, match=r"services are running.*executor"):
                    await restore_all(conn, saved, replace=True)
                code, out = await longhaul(nats, "restore", str(saved), "--replace", *work)
                assert code == 1 and "pass --force" in out, out
                assert await conn.js.stream_info(conn.names.stream)  # nothing was deleted
                forced = ("--replace", "--force", "--workdir", str(tmp_path / "w3"))
                code, out = await longhaul(nats, "restore", str(saved), *forced)
                assert code == 0, out
            finally:
                await conn.close()
    # the first server and its disk are gone; a new one starts empty
    with NatsServer(tmp_path / "second", port=0) as second:
        nats = NatsConfig(url=second.url, namespace=namespace)
        code, out = await longhaul(nats, "restore", str(saved), "--workdir", str(tmp_path / "w2"))
        assert code == 0, out
        conn = await connect(nats)
        try:  # never over a deployment's own streams
            with pytest.raises(BackupError, match="exist already"):
                await restore_all(conn, saved)
        finally:
            await conn.close()
        async with (
            serve_gateway(gateway_config(nats)) as gateway,
            InProcessExecutor(second.url, namespace, settings={"working_root": tmp_path / "w"}),
            gateway.client() as client,
        ):
            view = (await client.get(f"/api/traces/{trace_id}")).json()
            assert view["status"] == "waiting" and view["wait_reason"] == "human"
            assert (await client.get(f"/api/traces/{trace_id}/messages")).json() == before
            listed = (await client.get("/api/traces")).json()["traces"]
            assert trace_id in {t["trace_id"] for t in listed}
            reply = await client.post(f"/api/traces/{trace_id}/reply", json={"content": "blue"})
            assert reply.status_code == 202, reply.text
            conn = await connect(nats)
            try:
                done = await wait_for_trace(EventStore(conn), trace_id, within=DEADLINE_S)
            finally:
                await conn.close()
            assert done.status == "completed"
            assert done.messages[done.head_sequence].content == "blue it is"
