"""Retention through the running stack: a completed trace past ``retention.completed`` is
deleted as a DELETE would (gone from the stream and the buckets, counted on /metrics); a
stopped trace, which ended earlier but whose status has no retention, stays."""

from __future__ import annotations

from pathlib import Path

from longhaul.core.config import NatsConfig, RetentionConfig
from longhaul.core.connection import Connection
from longhaul.core.store import EventStore

from tests.integration.executor.scripts import write_script
from tests.integration.gateway.harness import gateway_config, serve_gateway, user_message
from tests.support.jetstream import holding
from tests.support.stack import InProcessExecutor, eventually, wait_for_trace

DEADLINE_S = 60


async def test_retention_deletes_only_what_expired(
    nats_config: NatsConfig, conn: Connection, nats_url: str, namespace: str, tmp_path: Path
) -> None:
    config = gateway_config(nats_config)
    config.retention = RetentionConfig.model_validate({"completed": "1s", "sweep_interval_s": 0.2})
    model = write_script(tmp_path / "done.yaml", [{"content": "done"}])
    store = EventStore(conn)
    async with (
        serve_gateway(config) as gateway,
        InProcessExecutor(nats_url, namespace, settings={"working_root": tmp_path / "w"}),
        gateway.client() as http,
    ):
        body = {"messages": [user_message("ask me")], "tools": ["ask_human"]}
        asked = (await http.post("/api/traces", json=body)).json()["trace_id"]
        await wait_for_trace(store, asked, lambda s: s.status == "waiting", within=DEADLINE_S)
        assert (await http.post(f"/api/traces/{asked}/stop")).status_code == 202
        await wait_for_trace(store, asked, within=DEADLINE_S)
        body = {"messages": [user_message("go")], "model": model}
        done = (await http.post("/api/traces", json=body)).json()["trace_id"]
        assert (await wait_for_trace(store, done, within=DEADLINE_S)).status == "completed"

        async def gone() -> bool:
            return (await http.get(f"/api/traces/{done}")).status_code == 404

        await eventually(gone, within=DEADLINE_S)
        kept = (await http.get(f"/api/traces/{asked}")).json()
        assert kept["status"] == "stopped"
        deleted = 'longhaul_retention_traces_deleted_total{status="completed"} 1.0'

        async def counted() -> str | None:
            """The scrape once the sweep has counted: it does after the working directory,
            which goes after the trace stops being readable."""
            text = (await http.get("/metrics")).text
            return text if deleted in text else None

        metrics = await eventually(counted, within=DEADLINE_S)
        assert "longhaul_retention_events_deleted_total 0.0" not in metrics
    assert await holding(conn, [done]) == [f"$KV.{conn.names.traces}.{done}"]
    assert len(await holding(conn, [asked])) > 1
