"""The run viewer in headless Chromium: it lists traces, shows a trace's main path with its
tool calls, and follows a new run live over SSE."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from tests.e2e.cdp import chromium, find_chromium
from tests.integration.gateway.harness import RunningGateway

CHROMIUM = find_chromium()
pytestmark = pytest.mark.skipif(
    CHROMIUM is None,
    reason="chromium is not installed (Debian: apt-get install -y chromium); "
    "the run-viewer browser test needs it",
)


async def test_viewer_page_is_static_and_safe(stack: RunningGateway) -> None:
    async with httpx.AsyncClient(base_url=stack.url) as http:
        page = await http.get("/")
        script = await http.get("/viewer.js")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert '<script src="/viewer.js">' in page.text
    assert "script-src 'self'" in page.headers["content-security-policy"]
    assert script.headers["content-type"].startswith("text/javascript")
    assert "innerHTML" not in script.text  # everything is rendered with textContent


async def test_viewer_lists_shows_and_follows_live(stack: RunningGateway, tmp_path: Path) -> None:
    assert CHROMIUM is not None
    async with stack.client() as http:
        done = (
            await http.post(
                "/api/traces",
                json={
                    "messages": [{"role": "user", "content": "find the files"}],
                    "model": "scripted:auto",
                    "tools": ["glob"],
                    "name": "earlier run",
                },
            )
        ).json()["trace_id"]
        async with http.stream("GET", f"/api/traces/{done}/events") as events:
            async for line in events.aiter_lines():
                if line == "event: completed":
                    break

    async with chromium(CHROMIUM, tmp_path / "profile") as browser:
        page = await browser.open(f"{stack.url}/#{done}")
        await page.wait_for(
            "[...document.querySelectorAll('#trace-list li')].some(li => "
            f"li.dataset.traceId === '{done}' && li.textContent.includes('earlier run'))"
        )
        await page.wait_for("document.querySelectorAll('#messages .msg').length >= 4")
        texts = await page.evaluate(
            "[...document.querySelectorAll('#messages .msg')].map(m => m.textContent)"
        )
        assert "find the files" in texts[0]
        assert any("→ glob(" in text for text in texts)
        assert await page.evaluate("document.getElementById('trace-meta').textContent")
        assert "completed" in await page.evaluate(
            "document.getElementById('trace-meta').textContent"
        )

        # Start a run from the page: it opens it and fills in live over SSE.
        await page.evaluate("""
            document.getElementById('new-task').value = 'live one';
            document.getElementById('new-trace').requestSubmit();
        """)
        await page.wait_for(
            "[...document.querySelectorAll('#messages .msg.user')]"
            ".some(m => m.textContent.includes('live one'))"
        )
        # The executor's steps arrive over SSE and the page re-renders the main path.
        await page.wait_for("document.querySelectorAll('#messages .msg.tool').length >= 2")
        live_id = await page.evaluate("location.hash.slice(1)")
        assert live_id.startswith("t_") and live_id != done
        async with stack.client() as http:
            path = (await http.get(f"/api/traces/{live_id}/messages")).json()["messages"]
        assert path[0]["content"] == "live one"
        assert page.errors() == []
