"""Memory through the whole stack (real nats-server, gateway, in-process executor): a
reflection records experiences and leaves the main path alone; a second run of a similar task
starts with them in its first message and its citation moves the counter; another key's run
neither sees them nor can move their counters."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import msgspec
import pytest
from longhaul.core.config import NatsConfig
from longhaul.core.connection import Connection
from longhaul.core.store import EventStore
from longhaul.domain.config import ModelsConfig
from longhaul.domain.experiences import Experience

from tests.integration.executor.scripts import write_script
from tests.integration.gateway.harness import (
    RunningGateway,
    gateway_config,
    serve_gateway,
    user_message,
)
from tests.integration.gateway.test_key_isolation import owner_of
from tests.integration.gateway.test_uploads import final_view
from tests.support.folds import trace_state
from tests.support.kv import kv_until
from tests.support.stack import InProcessExecutor, test_config

KEY_A, KEY_B = "key-a-recall-0123456789", "key-b-recall-9876543210"
TASK = "Find where parse() is defined in this Python repo"
LESSON = {
    "category": "tool_usage",
    "tags": {"intent": ["code_search"], "state": ["python_repo"]},
    "content": "When looking for a definition in a Python repo, grep for 'def name(' first.",
}
WAIT_S = 20.0


@pytest.fixture
async def gateway(nats_config: NatsConfig) -> AsyncIterator[RunningGateway]:
    async with serve_gateway(gateway_config(nats_config, api_keys=f"{KEY_A},{KEY_B}")) as gw:
        yield gw


async def wait_for_helpful(conn: Connection, owner: str, experience_id: str, count: int) -> None:
    """Follow the record in the KV until its ``helpful`` counter reaches ``count``."""

    def reached(value: bytes) -> bool:
        helpful = msgspec.json.decode(value, type=Experience).metrics.helpful
        assert helpful <= count
        return helpful == count

    await kv_until(conn, conn.names.experiences, f"{owner}.{experience_id}", reached, within=WAIT_S)


async def run_trace(
    client: httpx.AsyncClient, store: EventStore, model: str, text: str = TASK, **fields: Any
) -> str:
    body = {"messages": [user_message(text)], "model": model, **fields}
    trace_id: str = (await client.post("/api/traces", json=body)).json()["trace_id"]
    assert (await final_view(client, store, trace_id))["status"] == "completed"
    return trace_id


async def messages(client: httpx.AsyncClient, trace_id: str, mode: str) -> list[dict[str, Any]]:
    response = await client.get(f"/api/traces/{trace_id}/messages", params={"mode": mode})
    found: list[dict[str, Any]] = response.json()["messages"]
    return found


async def test_a_second_run_starts_with_what_the_first_learned(
    gateway: RunningGateway,
    store: EventStore,
    conn: Connection,
    nats_url: str,
    namespace: str,
    tmp_path: Path,
) -> None:
    tags = write_script(
        tmp_path / "tags.yaml",
        [{"content": json.dumps({"intent": ["code_search"], "state": ["python_repo"]})}],
    )
    config = test_config(nats_url, namespace, models=ModelsConfig(roles={"utility": tags}))
    first_model = write_script(
        tmp_path / "first.yaml",
        [
            {"content": "parse() is in parser.py"},
            {"content": json.dumps({"experiences": [LESSON]})},
        ],
    )
    async with (
        InProcessExecutor(nats_url, namespace, config=config),
        gateway.client(KEY_A) as alice,
        gateway.client(KEY_B) as bob,
    ):
        first = await run_trace(alice, store, first_model)
        before = await messages(alice, first, "main_path")
        after_seq = (await trace_state(store, first)).stream_seq
        assert (
            await alice.post(f"/api/traces/{first}/reflect", json={"focus": "search"})
        ).status_code == 202
        assert (await final_view(alice, store, first, after=after_seq))["status"] == "completed"
        assert await messages(alice, first, "main_path") == before
        branch = [
            m for m in await messages(alice, first, "all") if m["branch_type"] == "reflection"
        ]
        assert "focus: search" in branch[0]["content"]

        (learned,) = (await alice.get("/api/experiences")).json()["experiences"]
        assert learned["trace_id"] == first and learned["metrics"] == {"helpful": 1, "harmful": 0}
        assert learned["tags"] == LESSON["tags"] and learned["content"] == LESSON["content"]
        assert branch[-1]["content"] == f"Recorded experiences: {learned['id']}"
        assert (await bob.get("/api/experiences")).json()["experiences"] == []

        # Alice again, a similar task: the lesson is in the first message; citing it counts.
        second_model = write_script(
            tmp_path / "second.yaml", [{"content": f"Grepped first, as {learned['id']} says."}]
        )
        second = await run_trace(alice, store, second_model, TASK.replace("parse", "render"))
        opening = (await messages(alice, second, "main_path"))[0]["content"]
        assert "## Reference experiences" in opening and f"[{learned['id']}]" in opening
        await wait_for_helpful(conn, owner_of(KEY_A), learned["id"], 2)
        quiet = write_script(tmp_path / "quiet.yaml", [{"content": "done"}])
        plain = await run_trace(alice, store, quiet, TASK, experiences=False)
        assert (await messages(alice, plain, "main_path"))[0]["content"] == TASK

        # Bob, same task: his own (unrelated) record only; citing Alice's id moves nothing of hers.
        mine = (
            await bob.post(
                "/api/experiences",
                json={
                    "category": "environment",
                    "content": "Bob's rule.",
                    "tags": {"intent": ["cooking"]},
                },
            )
        ).json()
        bob_model = write_script(
            tmp_path / "bob.yaml", [{"content": f"Using {learned['id']} and {mine['id']}."}]
        )
        third = await run_trace(bob, store, bob_model)
        assert (await messages(bob, third, "main_path"))[0]["content"] == TASK
        await wait_for_helpful(conn, owner_of(KEY_B), mine["id"], 1)
        theirs = (await alice.get(f"/api/experiences/{learned['id']}")).json()
        assert theirs["metrics"] == {"helpful": 2, "harmful": 0}
