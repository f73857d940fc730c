"""Just enough of the Chrome DevTools Protocol to drive headless Chromium from a test:
launch, open a page, evaluate JavaScript, wait for the DOM to satisfy a condition (a
MutationObserver inside the page, not polling), and collect the page's errors."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import re
import shutil
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import websockets

LAUNCH_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--remote-debugging-port=0",
]
START_DEADLINE_S = 30.0
CALL_DEADLINE_S = 30.0


def find_chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name)
        if found:
            return found
    return None


class CdpError(RuntimeError):
    pass


class Browser:
    def __init__(self, process: asyncio.subprocess.Process, ws: Any) -> None:
        self.process = process
        self.ws = ws
        self._ids = itertools.count(1)
        self._pending: dict[int, asyncio.Future[dict[str, Any]]] = {}
        self.events: list[dict[str, Any]] = []
        self._reader = asyncio.create_task(self._read())

    async def _read(self) -> None:
        async for raw in self.ws:
            message = json.loads(raw)
            future = self._pending.pop(message.get("id", -1), None)
            if future is not None and not future.done():
                future.set_result(message)
            elif "method" in message:
                self.events.append(message)

    async def send(
        self, method: str, params: dict[str, Any] | None = None, session: str | None = None
    ) -> dict[str, Any]:
        call_id = next(self._ids)
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._pending[call_id] = future
        message: dict[str, Any] = {"id": call_id, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        await self.ws.send(json.dumps(message))
        async with asyncio.timeout(CALL_DEADLINE_S):
            answer = await future
        if "error" in answer:
            raise CdpError(f"{method}: {answer['error']}")
        return dict(answer.get("result", {}))

    async def open(self, url: str) -> Page:
        target = await self.send("Target.createTarget", {"url": "about:blank"})
        attached = await self.send(
            "Target.attachToTarget", {"targetId": target["targetId"], "flatten": True}
        )
        page = Page(self, attached["sessionId"])
        await self.send("Runtime.enable", session=page.session)
        await self.send("Page.enable", session=page.session)
        await self.send("Page.navigate", {"url": url}, session=page.session)
        return page


class Page:
    def __init__(self, browser: Browser, session: str) -> None:
        self.browser = browser
        self.session = session

    async def evaluate(self, expression: str) -> Any:
        result = await self.browser.send(
            "Runtime.evaluate",
            {"expression": expression, "awaitPromise": True, "returnByValue": True},
            session=self.session,
        )
        if "exceptionDetails" in result:
            details = result["exceptionDetails"]
            text = details.get("exception", {}).get("description") or details.get("text")
            raise CdpError(f"page error: {text}")
        return result["result"].get("value")

    async def wait_for(self, predicate: str, timeout_ms: int = 20_000) -> Any:
        """Resolve when the JS expression ``predicate`` is truthy, re-checked on every DOM
        mutation; fails with the predicate's text after ``timeout_ms``."""
        source = json.dumps(predicate)
        return await self.evaluate(f"""
            new Promise((resolve, reject) => {{
              const check = () => {{
                let value; try {{ value = ({predicate}); }} catch (e) {{ value = undefined; }}
                if (value) {{ observer.disconnect(); clearTimeout(timer); resolve(value); }}
              }};
              const observer = new MutationObserver(check);
              const timer = setTimeout(() => {{
                observer.disconnect(); reject(new Error("timed out waiting for " + {source}));
              }}, {timeout_ms});
              observer.observe(document, {{subtree: true, childList: true,
                                          characterData: true, attributes: true}});
              check();
            }})""")

    def errors(self) -> list[str]:
        """Uncaught exceptions and console.error calls seen on this page so far."""
        found: list[str] = []
        for event in self.browser.events:
            if event.get("sessionId") != self.session:
                continue
            params = event.get("params", {})
            if event["method"] == "Runtime.exceptionThrown":
                found.append(str(params.get("exceptionDetails", {}).get("text")))
            elif event["method"] == "Runtime.consoleAPICalled" and params.get("type") == "error":
                found.append(" ".join(str(a.get("value")) for a in params.get("args", [])))
        return found


@contextlib.asynccontextmanager
async def chromium(binary: str, user_data_dir: Path) -> AsyncIterator[Browser]:
    process = await asyncio.create_subprocess_exec(
        binary,
        *LAUNCH_FLAGS,
        f"--user-data-dir={user_data_dir}",
        "about:blank",
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
        start_new_session=True,
    )
    assert process.stderr is not None
    drain: asyncio.Task[None] | None = None
    try:
        async with asyncio.timeout(START_DEADLINE_S):
            while True:
                line = (await process.stderr.readline()).decode(errors="replace")
                if not line:
                    raise CdpError("chromium exited before DevTools was listening")
                match = re.search(r"DevTools listening on (ws://\S+)", line)
                if match:
                    break

        async def discard() -> None:
            assert process.stderr is not None
            while await process.stderr.read(65536):
                pass

        drain = asyncio.create_task(discard())
        async with websockets.connect(match.group(1), max_size=None) as ws:
            browser = Browser(process, ws)
            try:
                yield browser
            finally:
                with contextlib.suppress(Exception):
                    await browser.send("Browser.close")
                browser._reader.cancel()
    finally:
        if process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                process.terminate()
            try:
                async with asyncio.timeout(10):
                    await process.wait()
            except TimeoutError:
                process.kill()
                await process.wait()
        if drain is not None:
            drain.cancel()
