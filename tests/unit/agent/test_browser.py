"""The browser tools through the engine against a real local page and the system Chromium:
navigate, read, click, read the change, type, screenshot (an image to the model); the browser
is gone when the turn ends; the SSRF policy refuses private targets, redirect hops and
subresources included."""

from __future__ import annotations

import base64
import gzip
import os
import shutil
from pathlib import Path
from typing import Any

import pytest
from longhaul.agent import ToolRegistry
from longhaul.agent.images import sniff
from longhaul.agent.tools.browser import BROWSER_TOOLS
from longhaul.agent.tools.settings import ToolSettings
from longhaul.domain import events as ev
from websockets.asyncio.server import ServerConnection, serve

from tests.support.pages import LocalSite
from tests.unit.agent.support import (
    MemorySink,
    MemoryWorkspace,
    answer,
    call,
    calls,
    make_engine,
    new_state,
    scripted,
)

pytestmark = pytest.mark.skipif(
    shutil.which("chromium") is None,
    reason="the browser tools need the system chromium (installed by make test)",
)

APP = b"""<html><head><title>Counter</title></head><body>
<h1 id="status">Waiting</h1>
<input name="who" aria-label="who">
<button onclick="document.getElementById('status').textContent =
  'Pressed by ' + document.querySelector('input').value">Press me</button>
<img src="http://unresolvable.invalid/pixel.png">
</body></html>"""


def descendants() -> set[int]:
    """Processes below this one (the Playwright driver and Chromium while a browser runs)."""
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            parents[int(entry)] = int(stat.rsplit(")", 1)[1].split()[1])
    found: set[int] = set()
    frontier = {os.getpid()}
    while frontier:
        frontier = {pid for pid, parent in parents.items() if parent in frontier} - found
        found |= frontier
    return found


async def run(
    tmp_path: Path, url: str, steps: list[dict[str, Any]], *, allow_private: bool = True
) -> tuple[MemorySink, Any]:
    model, script = scripted(calls(*steps), answer("done"))
    state = new_state(config=ev.TraceConfig(preset="browser"))
    sink = MemorySink(state)
    engine = make_engine(
        tmp_path,
        tools=ToolRegistry(BROWSER_TOOLS),
        workspace=MemoryWorkspace(),
        tool_settings=ToolSettings(webfetch_allow_private=allow_private),
    )
    await engine.run_turn(state, sink, model=model)
    return sink, script


def results(sink: MemorySink) -> list[ev.MessageAppended]:
    return [m for m in sink.of_type(ev.MessageAppended) if m.role == "tool"]


async def test_navigate_read_click_type_and_see_the_page(tmp_path: Path) -> None:
    before = descendants()
    site = LocalSite({"/app": ("text/html", APP)})
    async with site as url:
        sink, script = await run(
            tmp_path,
            url,
            [
                call("browser_navigate", {"url": url + "app"}, id="c1"),
                call("browser_snapshot", id="c2"),
                call("browser_type", {"selector": "input[name=who]", "text": "Ada"}, id="c3"),
                call("browser_click", {"text": "Press me"}, id="c4"),
                call("browser_snapshot", id="c5"),
                call("browser_screenshot", id="c6"),
            ],
        )
    navigated, first, typed, clicked, second, shot = results(sink)
    assert all(m.error_code is None for m in results(sink)), [m.content for m in results(sink)]
    assert str(navigated.content).startswith("HTTP 200: Counter")
    assert 'heading "Waiting"' in str(first.content) and "Pressed" not in str(first.content)
    assert 'button "Press me"' in str(first.content)
    assert "typed into" in str(typed.content) and "clicked 'Press me'" in str(clicked.content)
    assert 'heading "Pressed by Ada"' in str(second.content)
    assert "screenshot of Counter" in str(shot.content)
    # the screenshot reached the model as an image after the tool group
    sent = script.requests[-1].messages
    [shown] = [m for m in sent if m["role"] == "user" and isinstance(m["content"], list)]
    assert sent.index(shown) == max(i for i, m in enumerate(sent) if m["role"] == "tool") + 1
    [image] = [p for p in shown["content"] if p.get("type") == "image_url"]
    png = base64.b64decode(image["image_url"]["url"].split(",", 1)[1])
    assert sniff(png) == "image/png" and len(png) > 1000
    # the subresource on a name that does not resolve was stopped by the guard, not Chromium
    assert "/pixel.png" not in "".join(site.hosts)
    # the browser did not outlive the turn
    assert descendants() <= before


async def test_a_new_turn_gets_a_fresh_browser(tmp_path: Path) -> None:
    async with LocalSite({"/app": ("text/html", APP)}) as url:
        await run(tmp_path, url, [call("browser_navigate", {"url": url + "app"})])
        sink, _ = await run(tmp_path, url, [call("browser_snapshot")])
    [snapshot] = results(sink)
    assert str(snapshot.content).startswith("(untitled) — about:blank")


async def test_private_targets_are_refused_without_the_allowance(tmp_path: Path) -> None:
    async with LocalSite({"/app": ("text/html", APP)}) as url:
        sink, _ = await run(
            tmp_path,
            url,
            [
                call("browser_navigate", {"url": url + "app"}),
                call("browser_navigate", {"url": "http://169.254.169.254/latest/meta-data/"}),
                call("browser_navigate", {"url": "file:///etc/passwd"}),
            ],
            allow_private=False,
        )
    loopback, metadata, local_file = results(sink)
    assert loopback.error_code == "address_refused" and "loopback" in str(loopback.content)
    assert metadata.error_code == "address_refused" and "link-local" in str(metadata.content)
    assert local_file.error_code == "address_refused"


async def test_every_hop_of_a_navigation_is_checked(tmp_path: Path) -> None:
    """A redirect is followed through the guard: an allowed one lands, one to a target the
    policy refuses, two hops on, is refused by the guard (Chromium alone would report a DNS
    failure)."""
    redirects = {"/away": "/again", "/again": "http://unresolvable.invalid/"}
    async with LocalSite(redirects=redirects) as url:
        sink, _ = await run(
            tmp_path,
            url,
            [
                call("browser_navigate", {"url": url}),  # / redirects (302) to /page
                call("browser_navigate", {"url": url + "away"}),
            ],
        )
    redirected, away = results(sink)
    assert redirected.error_code is None
    assert str(redirected.content).endswith(f"(redirected to {url}page)")
    assert away.error_code == "address_refused"
    assert "cannot resolve unresolvable.invalid" in str(away.content)


async def test_a_missing_browser_is_a_clear_error(tmp_path: Path) -> None:
    model, _ = scripted(calls(call("browser_snapshot")), answer("done"))
    state = new_state(config=ev.TraceConfig(preset="browser"))
    sink = MemorySink(state)
    settings = ToolSettings(browser_executable=str(tmp_path / "no-chromium"))
    engine = make_engine(tmp_path, tools=ToolRegistry(BROWSER_TOOLS), tool_settings=settings)
    await engine.run_turn(state, sink, model=model)
    [failed] = results(sink)
    assert failed.error_code == "browser_unavailable"
    assert "cannot start Chromium" in str(failed.content)


async def test_the_page_is_fetched_from_the_address_that_was_checked(tmp_path: Path) -> None:
    """DNS rebinding: the guard checks a name's addresses, then fetches from the one it
    checked itself (the name kept in ``Host``), so Chromium never resolves the name again.
    The site sees the guard's request, not Chromium's (its ``Accept-Encoding`` is the
    guard's), under the name the page asked for; a gzipped page still renders."""
    site = LocalSite(
        {"/zipped": ("text/html", gzip.compress(b"<html><body><p>unzipped</p></body></html>"))},
        headers={"/zipped": {"Content-Encoding": "gzip"}},
    )
    async with site as url:
        sink, _ = await run(
            tmp_path,
            url,
            [
                call("browser_navigate", {"url": url + "zipped"}),
                call("browser_snapshot", {}),
            ],
        )
    navigated, snapshot = results(sink)
    assert navigated.error_code is None, navigated.content
    assert "unzipped" in str(snapshot.content)
    port = url.rsplit(":", 1)[1].strip("/")
    assert site.hosts and all(host == f"localhost:{port}" for host in site.hosts)
    assert site.accept_encodings and set(site.accept_encodings) == {"gzip, deflate"}


async def test_a_websocket_is_relayed_from_the_address_that_was_checked(tmp_path: Path) -> None:
    """DNS rebinding through a WebSocket: Chromium would resolve the name again after the
    guard's check. The guard relays the socket over its own connection to the address it
    checked (the server sees the guard's client, under the name the page asked for), and
    messages pass both ways."""
    seen: list[tuple[str, str]] = []

    async def echo(connection: ServerConnection) -> None:
        headers = connection.request.headers if connection.request else {}
        seen.append((headers.get("Host", ""), headers.get("User-Agent", "")))
        async for message in connection:
            text = message if isinstance(message, str) else message.decode()
            await connection.send(f"echo: {text}")

    async with serve(echo, "127.0.0.1", 0) as server:
        port = server.sockets[0].getsockname()[1]
        page = f"""<html><head><title>socket</title></head><body><p id="out">none</p>
<script>const ws = new WebSocket("ws://localhost:{port}/echo");
ws.onopen = () => ws.send("ping");
ws.onmessage = (m) => {{ document.getElementById("out").textContent = m.data; }};
</script></body></html>""".encode()
        async with LocalSite({"/socket": ("text/html", page)}) as url:
            sink, _ = await run(
                tmp_path,
                url,
                [
                    call("browser_navigate", {"url": url + "socket"}),
                    call("browser_click", {"text": "echo: ping"}),
                ],
            )
    navigated, clicked = results(sink)
    assert navigated.error_code is None, navigated.content
    assert clicked.error_code is None, clicked.content  # the echo reached the page
    [(host, agent)] = seen
    assert host == f"localhost:{port}"
    assert agent.startswith("Python/") and "websockets" in agent, (
        agent
    )  # the guard's, not Chromium's
