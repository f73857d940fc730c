"""Secrets never reach a model, a tool or a log. ``longhaul up`` runs with canary API and
provider keys; a trace's bash command goes looking for them (its environment, every process's
environ it can see, the data dir) and a WebSocket client passes its key in the query string.
Afterwards no stored event (tool outputs included), no log line and no index entry holds an API
key, a provider key or a NATS password."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import httpx
import websockets
from longhaul.core.connection import connect

from tests.chaos.up import Up, admin_config
from tests.integration.executor.scripts import write_script
from tests.support.env import SCRIPTED_DIR_VAR, service_env

API_KEY = "canary-api-key-5f1e2d3c4b5a6978"
PROVIDER_KEYS = {
    "OPENAI_API_KEY": "canary-openai-7a6b5c4d3e2f1a0b",
    "ANTHROPIC_API_KEY": "canary-anthropic-0b1a2f3e4d5c6b7a",
}
HUNT = (  # its environment, then every ancestor's (the executor's above all), then files
    "env; p=$$; while [ \"$p\" -gt 1 ]; do tr '\\0' '\\n' < /proc/$p/environ; "
    "p=$(awk '/^PPid/{print $2}' /proc/$p/status); done 2>/dev/null; "
    "cat ../*/nats-credentials.json ../../nats-credentials.json 2>/dev/null; ls -la / ..; true"
)
DEADLINE_S = 90.0


async def test_no_key_or_password_reaches_an_event_a_tool_or_a_log(tmp_path: Path) -> None:
    model = write_script(
        tmp_path / "hunt.yaml",
        [
            {"tool_calls": [{"name": "bash", "arguments": {"command": HUNT}}]},
            {"content": "looked around"},
        ],
    )
    env = {
        **service_env(),
        SCRIPTED_DIR_VAR: str(tmp_path),
        "LONGHAUL_API_KEYS": API_KEY,
        **PROVIDER_KEYS,
    }
    up = Up(tmp_path, env)
    state = await up.start()
    try:
        headers = {"Authorization": f"Bearer {API_KEY}"}
        async with httpx.AsyncClient(base_url=state["gateway"], headers=headers) as http:
            body = {"messages": [{"role": "user", "content": "find secrets"}], "model": model}
            trace_id = (await http.post("/api/traces", json=body)).json()["trace_id"]
            ws_url = state["gateway"].replace("http", "ws", 1)
            async with websockets.connect(
                f"{ws_url}/api/traces/{trace_id}/watch?api_key={API_KEY}"
            ) as ws:
                await asyncio.wait_for(ws.recv(), timeout=DEADLINE_S)
            deadline = time.monotonic() + DEADLINE_S
            while (await http.get(f"/api/traces/{trace_id}")).json()["status"] == "running":
                assert time.monotonic() < deadline, "the trace did not finish"
                await asyncio.sleep(0.2)
            messages = (await http.get(f"/api/traces/{trace_id}/messages")).json()["messages"]
        [output] = [m for m in messages if m["role"] == "tool"]
        assert output["content"]  # the hunt ran (or was refused) and said so

        credentials = json.loads(await asyncio.to_thread(Path(state["nats_credentials"]).read_text))
        secrets = [API_KEY, *PROVIDER_KEYS.values(), *credentials.values()]
        conn = await connect(admin_config(state))
        try:
            info = await conn.js.stream_info(conn.names.stream)
            stored = [
                (await conn.js.get_msg(conn.names.stream, seq)).data or b""
                for seq in range(info.state.first_seq, info.state.last_seq + 1)
            ]
            index = await conn.kv(conn.names.traces)
            entries = [(await index.get(key)).value or b"" for key in await index.keys()]
        finally:
            await conn.close()
    finally:
        await up.stop()
    logs = [p.read_bytes() for p in (tmp_path / "logs").glob("*.log")]
    logs.append((tmp_path / "up.out").read_bytes())
    assert len(stored) >= 4 and logs
    for secret in secrets:
        needle = secret.encode()
        assert not any(needle in data for data in stored), f"{secret[:12]}… in an event"
        assert not any(needle in data for data in entries), f"{secret[:12]}… in the index"
        assert not any(needle in data for data in logs), f"{secret[:12]}… in a log"
