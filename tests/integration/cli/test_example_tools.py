"""The own-tools section of docs/04-models-and-tools.md as written: ``examples/tools`` loaded
into a real ``longhaul up`` by configuration alone, a trace calling its tools against a real
HTTP service on loopback, each tool seeing only the secrets the operator granted it and never
the model."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
from longhaul.client import AsyncClient

from tests.integration.cli.harness import cli_env, running_up
from tests.integration.executor.scripts import write_script
from tests.support.counting_server import JsonHandler, serving

TOKEN = "tickets-token-7f3a"


class TicketSystem:
    """A ticket service that files one ticket per Idempotency-Key."""

    def __init__(self) -> None:
        self.tickets: list[dict[str, Any]] = []
        self.by_key: dict[str, str] = {}
        self.refused: list[str] = []

    def handler(self) -> type[JsonHandler]:
        system = self

        class Tickets(JsonHandler):
            def _authorised(self) -> bool:
                if self.headers.get("Authorization") == f"Bearer {TOKEN}":
                    return True
                system.refused.append(self.path)
                self.answer(401, {"error": "who are you"})
                return False

            def do_POST(self) -> None:
                if not self._authorised():
                    return
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                key = self.headers.get("Idempotency-Key", "")
                if key not in system.by_key:
                    number = f"T-{len(system.tickets) + 1}"
                    system.tickets.append({"id": number, "key": key, **body})
                    system.by_key[key] = number
                self.answer(201, {"id": system.by_key[key]})

            def do_GET(self) -> None:
                if not self._authorised():
                    return
                query = parse_qs(urlsplit(self.path).query).get("q", [""])[0]
                found = [t for t in system.tickets if query in t["title"] + t["body"]]
                self.answer(200, found[::-1])

        return Tickets


async def test_the_example_tools_run_in_longhaul_up_with_their_secrets(tmp_path: Path) -> None:
    system = TicketSystem()
    model = write_script(
        tmp_path / "agent.yaml",
        [
            {
                "tool_calls": [
                    {
                        "name": "create_ticket",
                        "arguments": {
                            "title": "Disk full on build host",
                            "body": "/var is at 100%",
                            "priority": "high",
                        },
                    }
                ]
            },
            {
                "tool_calls": [
                    {"name": "find_tickets", "arguments": {"query": "Disk"}},
                    {"name": "word_count", "arguments": {"text": "three little words"}},
                ]
            },
            {"content": "Filed it."},
        ],
    )
    with serving(system.handler()) as url:
        env = cli_env(
            LONGHAUL_EXECUTOR__TOOL_MODULES="examples.tools.tickets",
            LONGHAUL_TOOLS__SECRETS=json.dumps(
                {
                    "create_ticket": {"url": "TICKETS_URL", "token": "TICKETS_TOKEN"},
                    "find_tickets": {"url": "TICKETS_URL", "token": "TICKETS_TOKEN"},
                }
            ),
            TICKETS_URL=url,
            TICKETS_TOKEN=TOKEN,
        )
        async with running_up(tmp_path / "data", env) as gateway:
            async with AsyncClient(gateway) as client:
                accepted = await client.create_trace("our build host is out of disk", model=model)
                trace = await client.wait(accepted.trace_id)
                messages = (await client.messages(accepted.trace_id)).messages
            async with httpx.AsyncClient(base_url=gateway, timeout=10) as http:
                listed = (await http.get("/api/tools")).json()["tools"]
    assert trace.status == "completed", trace
    assert [t["title"] for t in system.tickets] == ["Disk full on build host"]
    assert system.tickets[0]["priority"] == "high" and system.refused == []
    assert system.tickets[0]["key"].startswith(accepted.trace_id)  # the call's idempotency key
    results = [m.content for m in messages if m.role == "tool"]
    assert results[0] == "filed ticket T-1: Disk full on build host"
    assert "T-1 [high] Disk full on build host" in str(results[1]) and results[2] == "3"
    # the tools are offered with their schemas; the secrets are nowhere the model can see
    tools = {tool["name"]: tool for tool in listed}
    assert tools["create_ticket"]["input_schema"]["required"] == ["title", "body"]
    assert tools["find_tickets"]["read_only"] and not tools["create_ticket"]["read_only"]
    assert (tools["create_ticket"]["effects"], tools["find_tickets"]["effects"]) == (
        "idempotent",
        "none",
    )
    seen_by_model = json.dumps([m.model_dump() for m in messages]) + json.dumps(listed)
    assert TOKEN not in seen_by_model and url not in seen_by_model
