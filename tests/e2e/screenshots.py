"""Screenshots of the run viewer's main views for docs/03-using-it.md, from a real stack running the
offline ``scripted:demo`` model: ``.venv/bin/python -m tests.e2e.screenshots docs/img``.

A gateway and an executor in this process, a nats-server the test support starts, Debian's
chromium through Playwright (as in the browser tests)."""

from __future__ import annotations

import asyncio
import shutil
import sys
import tempfile
from pathlib import Path

import httpx
from longhaul.core.config import NatsConfig
from longhaul.core.connection import connect
from longhaul.core.provision import ProvisionSettings
from longhaul.core.store import EventStore, Position
from longhaul.domain import events as ev
from playwright.async_api import async_playwright

from tests.integration.gateway.harness import gateway_config, serve_gateway
from tests.support.folds import task_state
from tests.support.nats import nats_server_url, unique_namespace
from tests.support.stack import InProcessExecutor

MODEL = "scripted:demo?latency_ms=120"


async def finished(http: httpx.AsyncClient, trace_id: str, after: int = 0) -> None:
    async with asyncio.timeout(60):
        async with http.stream(
            "GET", f"/api/traces/{trace_id}/events", params={"after": after}
        ) as events:
            async for line in events.aiter_lines():
                if line in ("event: completed", "event: failed", "event: waiting"):
                    return


async def shoot(out: Path, nats_url: str, work: Path) -> None:
    namespace = unique_namespace()
    nats = NatsConfig(url=nats_url, namespace=namespace)
    (work / "notes.txt").write_text("Ideas for the release:\n- faster replay\n- a better viewer\n")
    (work / "todo.md").write_text("# todo\n- write the changelog\n- tag 0.2\n")
    async with (
        serve_gateway(gateway_config(nats)) as gateway,
        InProcessExecutor(nats_url, namespace, "exec-shots", settings={"working_root": work}),
    ):
        async with gateway.client() as http:
            ask = {"role": "user", "content": "What is in my workdir? Write me a short summary."}
            created = await http.post(
                "/api/traces", json={"messages": [ask], "model": MODEL, "name": "workdir survey"}
            )
            demo = created.json()["trace_id"]
            await finished(http, demo)
            other = await http.post(
                "/api/traces",
                json={
                    "messages": [{"role": "user", "content": "Which colour should the logo be?"}],
                    "model": "scripted:auto",
                    "tools": ["ask_human"],
                    "name": "needs a person",
                },
            )
            await finished(http, other.json()["trace_id"])
            task = (await http.post("/api/tasks", json={"goal": "Ship release 0.2"})).json()
        conn = await connect(nats, provision_settings=ProvisionSettings())
        try:
            store = EventStore(conn)
            state = await task_state(store, task["task_id"])
            await store.append(
                "task",
                task["task_id"],
                [
                    ev.PlanCreated(
                        phases=[
                            ev.PhaseSpec(id="notes", name="collect notes", description="read"),
                            ev.PhaseSpec(id="log", name="changelog", depends_on=["notes"]),
                            ev.PhaseSpec(id="docs", name="docs pass", depends_on=["notes"]),
                            ev.PhaseSpec(id="tag", name="tag 0.2", depends_on=["log", "docs"]),
                        ]
                    ),
                    ev.PhaseStarted(phase_id="notes", trace_ids=[demo]),
                    ev.PhaseCompleted(phase_id="notes", summary="2 files of notes"),
                    ev.PhaseStarted(phase_id="log", trace_ids=[demo]),
                ],
                expected=Position(state.stream_seq, state.version),
                actor="planner:screenshots",
            )
        finally:
            await conn.close()

        async with async_playwright() as playwright:
            browser = await playwright.chromium.launch(
                executable_path=shutil.which("chromium"), args=["--no-sandbox"]
            )
            page = await browser.new_page(viewport={"width": 1400, "height": 1000})
            await page.goto(gateway.url + "/")
            await page.locator('[data-testid="trace-row"]').first.wait_for()
            await page.screenshot(path=str(out / "viewer-list.png"))
            await page.goto(f"{gateway.url}/#/traces/{demo}")
            await page.locator('[data-testid="timeline"] li').first.wait_for()
            await page.screenshot(path=str(out / "viewer-trace.png"))
            await page.goto(f"{gateway.url}/#/tasks/{task['task_id']}")
            await page.locator('[data-testid="phase"]').first.wait_for()
            await page.screenshot(path=str(out / "viewer-task.png"))
            await browser.close()


def main() -> None:
    out = Path(sys.argv[1] if len(sys.argv) > 1 else "docs/img")
    out.mkdir(parents=True, exist_ok=True)
    with nats_server_url() as url, tempfile.TemporaryDirectory() as work:
        asyncio.run(shoot(out, url, Path(work)))
    print(f"screenshots in {out}")


if __name__ == "__main__":
    main()
