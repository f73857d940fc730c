"""``/api/experiences`` against a real gateway and nats-server: records kept in JetStream per
API key, filters and paging, edits, the markdown export → import round trip, and another key
trying every route on them as an attacker would."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from longhaul.core.config import NatsConfig
from longhaul.core.connection import connect
from longhaul.core.experiences import ExperienceStore
from longhaul.domain.experiences import from_markdown

from tests.integration.gateway.harness import RunningGateway, gateway_config, serve_gateway
from tests.integration.gateway.test_key_isolation import owner_of

KEY_A, KEY_B = "key-a-memory-0123456789", "key-b-memory-9876543210"


@pytest.fixture
async def gateway(nats_config: NatsConfig) -> AsyncIterator[RunningGateway]:
    async with serve_gateway(gateway_config(nats_config, api_keys=f"{KEY_A},{KEY_B}")) as gw:
        yield gw


async def record(client: httpx.AsyncClient, content: str, **fields: Any) -> dict[str, Any]:
    body = {"category": "tool_usage", "content": content, **fields}
    response = await client.post("/api/experiences", json=body)
    assert response.status_code == 201, response.text
    return dict(response.json())


async def test_records_are_stored_per_key_and_filtered(gateway: RunningGateway) -> None:
    async with gateway.client(KEY_A) as alice:
        grep = await record(
            alice,
            "  When searching code, use grep -n first.  ",
            tags={"intent": ["Code Search"], "state": ["large-repo"]},
        )
        await record(alice, "Check the exit code of every build.", category="environment")
        await record(alice, "Plan long work with the goal tool.", category="logic_flow")
        assert grep["content"] == "When searching code, use grep -n first."
        assert grep["tags"] == {"state": ["large_repo"], "intent": ["code_search"]}
        assert grep["metrics"] == {"helpful": 0, "harmful": 0}
        assert grep["id"].startswith("ex_")

        listed = (await alice.get("/api/experiences")).json()
        assert [e["category"] for e in listed["experiences"]] == [
            "logic_flow",
            "environment",
            "tool_usage",
        ]
        by_tag = (await alice.get("/api/experiences", params={"tag": "code search"})).json()
        assert [e["id"] for e in by_tag["experiences"]] == [grep["id"]]
        by_text = (await alice.get("/api/experiences", params={"q": "EXIT CODE"})).json()
        assert [e["category"] for e in by_text["experiences"]] == ["environment"]
        by_category = (await alice.get("/api/experiences?category=logic_flow")).json()
        assert len(by_category["experiences"]) == 1

        first = (await alice.get("/api/experiences", params={"limit": 2})).json()
        assert len(first["experiences"]) == 2 and first["next_cursor"] == "2"
        rest = (await alice.get("/api/experiences?limit=2&cursor=2")).json()
        assert [e["id"] for e in rest["experiences"]] == [grep["id"]]
        assert rest["next_cursor"] is None

    # Durable in JetStream, under the key's owner id.
    conn = await connect(gateway.runtime.config.nats)
    try:
        stored = await ExperienceStore(conn).get(owner_of(KEY_A), grep["id"])
        assert stored is not None and stored.content == grep["content"]
    finally:
        await conn.close()


async def test_edit_delete_and_refusals(gateway: RunningGateway) -> None:
    async with gateway.client(KEY_A) as alice:
        item = await record(alice, "Retry flaky downloads twice.")
        url = f"/api/experiences/{item['id']}"
        patched = await alice.patch(
            url,
            json={
                "content": "Retry flaky downloads twice, then give up.",
                "tags": {"intent": ["download"]},
                "metrics": {"helpful": 3, "harmful": 1},
            },
        )
        assert patched.status_code == 200, patched.text
        assert (await alice.get(url)).json()["metrics"] == {"helpful": 3, "harmful": 1}
        assert (await alice.get(url)).json()["tags"]["intent"] == ["download"]

        bad = await alice.post("/api/experiences", json={"category": "gossip", "content": "x"})
        assert bad.status_code == 422
        blank = await alice.patch(url, json={"content": "   "})
        assert blank.status_code == 422
        assert (await alice.get("/api/experiences/ex_missing")).status_code == 404
        assert (await alice.get("/api/experiences/not-an-id")).status_code == 404
        assert (await alice.patch("/api/experiences/export", json={})).status_code == 405

        assert (await alice.delete(url)).status_code == 204
        assert (await alice.get(url)).status_code == 404
        assert (await alice.delete(url)).status_code == 404


async def test_export_import_round_trip_is_exact(gateway: RunningGateway) -> None:
    async with gateway.client(KEY_A) as alice, gateway.client(KEY_B) as bob:
        await record(
            alice,
            "Content with a rule line\n---\nand an escaped one\n\\---\n: yaml-ish: [x]",
            tags={"intent": ["edge"], "state": ["odd"]},
        )
        await record(alice, "Second rule.", category="environment")
        exported = await alice.get("/api/experiences/export")
        assert exported.status_code == 200
        assert exported.headers["content-type"].startswith("text/markdown")
        text = exported.text
        assert text.count("\n---\n") >= 3 and "id: ex_" in text and "helpful: 0" in text

        # Bob carries the file over: he gets copies under his key, Alice's stay hers.
        imported = await bob.post(
            "/api/experiences/import",
            content=text.encode(),
            headers={"Content-Type": "text/markdown"},
        )
        assert imported.status_code == 200, imported.text
        assert imported.json()["imported"] == 2
        assert (await bob.get("/api/experiences/export")).text == text
        again = await bob.post("/api/experiences/import", content=text.encode())
        assert again.json()["imported"] == 2
        assert len((await bob.get("/api/experiences")).json()["experiences"]) == 2
        assert from_markdown(text)[0].content.splitlines()[1:4] == [
            "---",
            "and an escaped one",
            "\\---",
        ]

        broken = await bob.post(
            "/api/experiences/import", content=b"---\nid: ex_1\ncategory: nope\n---\nx\n"
        )
        assert broken.status_code == 422
        assert broken.json()["error"]["code"] == "invalid_experience_file"
        assert "block 1" in broken.json()["error"]["message"]
        assert len((await bob.get("/api/experiences")).json()["experiences"]) == 2


async def test_another_key_cannot_reach_your_experiences(gateway: RunningGateway) -> None:
    async with gateway.client(KEY_A) as alice, gateway.client(KEY_B) as bob:
        mine = await record(alice, "Alice's secret rule.", tags={"intent": ["secret"]})
        url = f"/api/experiences/{mine['id']}"
        assert (await bob.get("/api/experiences")).json()["experiences"] == []
        assert (await bob.get("/api/experiences?tag=secret")).json()["experiences"] == []
        assert (await bob.get(url)).status_code == 404
        assert (await bob.patch(url, json={"content": "owned"})).status_code == 404
        assert (await bob.delete(url)).status_code == 404
        assert "Alice" not in (await bob.get("/api/experiences/export")).text

        # An import naming Alice's id makes Bob's own record; Alice's is untouched.
        forged = (
            f"---\nid: {mine['id']}\ncategory: tool_usage\n"
            "metrics: {helpful: 99, harmful: 0}\n---\nBob was here.\n"
        )
        response = await bob.post("/api/experiences/import", content=forged.encode())
        assert response.status_code == 200
        alices = (await alice.get(url)).json()
        assert alices["content"] == "Alice's secret rule."
        assert alices["metrics"] == {"helpful": 0, "harmful": 0}
        assert (await bob.get(url)).json()["content"] == "Bob was here."
        assert (await bob.delete(url)).status_code == 204
        assert (await alice.get(url)).status_code == 200


async def test_skills_lists_builtins_and_project_overrides(
    nats_config: NatsConfig, tmp_path: Path
) -> None:
    (tmp_path / "planning.md").write_text("---\ndescription: our own planning\n---\nUse Jira.")
    (tmp_path / "deploy").mkdir()
    (tmp_path / "deploy" / "SKILL.md").write_text("# Deploy with care\n…")
    config = gateway_config(nats_config)
    config.memory.skills_dir = tmp_path
    async with serve_gateway(config) as gw, gw.client() as http:
        listed = (await http.get("/api/skills")).json()["skills"]
    by_name = {skill["name"]: skill for skill in listed}
    assert by_name["planning"] == {
        "name": "planning",
        "description": "our own planning",
        "source": "project",
    }
    assert by_name["deploy"]["description"] == "Deploy with care"
    assert by_name["research"]["source"] == by_name["web"]["source"] == "builtin"
