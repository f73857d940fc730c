"""Browser tools: navigate, read, click and type on pages that need a real browser.

Backed by Playwright driving Chromium (the ``browser`` extra of ``longhaul-agent``; without
Playwright or a Chromium the tools answer ``browser_unavailable``). Chromium is the one on
``PATH`` unless ``browser_executable`` names another (else Playwright's own download).

One browser per turn and trace: the first browser tool call of a turn launches it with a
fresh context (no cookies, no storage), a turn resource (:mod:`longhaul.agent.resources`)
closes it when the turn ends, so nothing is shared across traces or survives a turn.

The SSRF policy of ``webfetch`` (:mod:`longhaul.agent.tools.netguard`) applies to every
request the page makes, the navigation itself and every redirect hop: each request is
intercepted, its host checked, and fetched by Playwright without following redirects; the
guard follows a redirect itself, checking each hop, and hands the browser the last response
(Playwright does not intercept the hops of a redirect the browser follows). So after a
redirect the page's URL is still the one requested (``browser_navigate`` names where it
landed; relative links resolve against the requested URL). The guard fetches over httpx,
connected to the address it checked (``Host`` and TLS server name kept), so a name that
resolves elsewhere a moment later (DNS rebinding) is never asked again; bodies are capped
while they are decoded. WebSockets are checked the same way and relayed by the guard too: it
connects to the checked address itself (``Host`` and TLS server name kept; messages capped)
and passes messages both ways, so Chromium never opens a connection of its own to a name it
would resolve again. Service workers are blocked (they would bypass interception), WebRTC may
not use UDP outside a proxy, background networking is off.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
from collections.abc import AsyncIterator, Coroutine
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any
from urllib.parse import urljoin, urlsplit

import httpx
from longhaul.agent.errors import ToolError
from longhaul.agent.tools.base import tool
from longhaul.agent.tools.context import ToolContext
from longhaul.agent.tools.decoding import ACCEPT_ENCODING, BoundedDecoder
from longhaul.agent.tools.netguard import IPAddress, checked_addresses
from longhaul.agent.tools.offload import fit_output
from longhaul.agent.tools.result import Attachment, ToolResult
from longhaul.agent.tools.settings import ToolSettings
from longhaul.agent.tools.web import pinned

if TYPE_CHECKING:
    from playwright.async_api import Locator, Page, Route, WebSocketRoute

LOCAL_SCHEMES = ("about", "data", "blob")
"""Requests that never leave the browser."""
MAX_REDIRECTS = 10
REDIRECTS = (301, 302, 303, 307, 308)
PAGE_MAX_BYTES = 20 * 1024 * 1024
"""One response's decoded body; a bigger one reaches the page cut."""
_HOP_HEADERS = frozenset(
    {"host", "connection", "content-length", "accept-encoding", "transfer-encoding"}
)
_DECODED_HEADERS = frozenset(
    {"content-encoding", "content-length", "transfer-encoding", "connection"}
)
ARGS = [
    "--disable-dev-shm-usage",
    "--disable-background-networking",
    "--force-webrtc-ip-handling-policy=disable_non_proxied_udp",
]


class Browser:
    """The page of one turn and the requests its guard refused."""

    def __init__(self, page: Page, settings: ToolSettings) -> None:
        self.page = page
        self.settings = settings
        self.refused: list[str] = []
        self.landed: dict[str, str] = {}
        """Requested URL → where its redirects led (the page keeps the requested URL)."""
        self._client: httpx.AsyncClient | None = None
        self._relays: set[asyncio.Task[None]] = set()
        """The WebSocket relays' tasks: owned here, cancelled when the turn ends."""

    async def addresses(self, url: str) -> list[IPAddress] | str:
        """The checked addresses ``url`` may be fetched from, or why it may not."""
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https", "ws", "wss") or not parts.hostname:
            return f"unsupported URL {url!r}: only http(s) pages"
        port = parts.port or (443 if parts.scheme in ("https", "wss") else 80)
        try:
            return await checked_addresses(
                parts.hostname, port, allow_private=self.settings.webfetch_allow_private
            )
        except ToolError as exc:
            return str(exc)

    async def check(self, url: str) -> str | None:
        """Why ``url`` may not be requested, or ``None``."""
        if urlsplit(url).scheme in LOCAL_SCHEMES:
            return None
        found = await self.addresses(url)
        return found if isinstance(found, str) else None

    async def fetch(
        self, url: str, address: IPAddress, method: str, headers: dict[str, str], body: bytes | None
    ) -> tuple[int, dict[str, str], bytes]:
        """One request to the checked ``address`` (never resolved again), no redirects
        followed, the body decoded with a cap."""
        target, host, extensions = pinned(url, str(address))
        sent = {k: v for k, v in headers.items() if k.lower() not in _HOP_HEADERS}
        sent.update(host)
        sent["Accept-Encoding"] = ACCEPT_ENCODING
        async with self.client().stream(
            method, target, headers=sent, content=body, extensions=extensions
        ) as response:
            decoder = BoundedDecoder(response.headers.get("content-encoding", ""), PAGE_MAX_BYTES)
            data = bytearray()
            async for chunk in response.aiter_raw():
                data += decoder.feed(chunk)
                if decoder.cut:
                    break
            kept = {k: v for k, v in response.headers.items() if k.lower() not in _DECODED_HEADERS}
            return response.status_code, kept, bytes(data)

    def client(self) -> httpx.AsyncClient:
        if self._client is None:
            self._client = httpx.AsyncClient(
                timeout=self.settings.browser_timeout_s, follow_redirects=False
            )
        return self._client

    async def aclose(self) -> None:
        for task in self._relays:
            task.cancel()
        await asyncio.gather(*self._relays, return_exceptions=True)
        if self._client is not None:
            await self._client.aclose()

    def _spawn(self, work: Coroutine[Any, Any, None]) -> None:
        task = asyncio.create_task(work)
        self._relays.add(task)
        task.add_done_callback(self._relays.discard)

    async def guard(self, route: Route) -> None:
        """Each request: checked, fetched without following redirects, each redirect hop
        checked and fetched here too, and the last response handed to the browser (never a
        redirect, which Chromium would follow without asking the guard again)."""
        url = route.request.url
        if urlsplit(url).scheme in LOCAL_SCHEMES:
            await route.continue_()
            return
        method = route.request.method
        headers = await route.request.all_headers()
        body = route.request.post_data_buffer
        for _ in range(MAX_REDIRECTS + 1):
            found = await self.addresses(url)
            if isinstance(found, str):
                self.refused.append(found)
                await route.abort("blockedbyclient")
                return
            try:
                status, answer, content = await self.fetch(url, found[0], method, headers, body)
            except (httpx.HTTPError, ToolError):  # the page sees a failed request
                await route.abort("failed")
                return
            location = answer.get("location")
            if status not in REDIRECTS or not location:
                if url != route.request.url:
                    self.landed[route.request.url] = url
                await route.fulfill(status=status, headers=answer, body=content)
                return
            url = urljoin(url, location)
            if status not in (307, 308):
                method, body = "GET", None
        self.refused.append(f"more than {MAX_REDIRECTS} redirects from {route.request.url}")
        await route.abort("blockedbyclient")

    async def guard_socket(self, socket: WebSocketRoute) -> None:
        """A WebSocket: checked, then relayed over the guard's own connection to the checked
        address (never Chromium's, which would resolve the name again)."""
        found = await self.addresses(socket.url)
        if isinstance(found, str):
            self.refused.append(found)
            await socket.close(code=1008, reason="refused by the SSRF policy")
            return
        try:
            from websockets.asyncio.client import connect
            from websockets.exceptions import ConnectionClosed, WebSocketException
        except ImportError:  # the browser extra brings it
            self.refused.append(f"WebSocket {socket.url}: websockets is not installed")
            await socket.close(code=1011, reason="no WebSocket relay here")
            return
        port = urlsplit(socket.url).port or (443 if socket.url.startswith("wss:") else 80)
        try:
            server = await connect(
                socket.url,
                host=str(found[0]),  # the TCP destination only: Host and TLS keep the name
                port=port,
                subprotocols=socket.protocols or None,  # type: ignore[arg-type]
                open_timeout=self.settings.browser_timeout_s,
                max_size=PAGE_MAX_BYTES,
                proxy=None,
            )
        except (OSError, TimeoutError, WebSocketException) as exc:
            self.refused.append(f"WebSocket {socket.url}: {exc}")
            await socket.close(code=1011, reason="the server could not be reached")
            return

        outgoing: asyncio.Queue[str | bytes] = asyncio.Queue()

        async def to_server() -> None:  # one sender: the page's messages keep their order
            with contextlib.suppress(ConnectionClosed):
                while True:
                    await server.send(await outgoing.get())

        async def from_server() -> None:
            with contextlib.suppress(ConnectionClosed):
                async for message in server:
                    socket.send(message)
            await server.close()
            await socket.close(code=server.close_code or 1000, reason=server.close_reason or "")

        socket.on_message(outgoing.put_nowait)
        socket.on_close(lambda code, reason: self._spawn(server.close(code or 1000, reason or "")))
        self._spawn(to_server())
        self._spawn(from_server())


def _executable(settings: ToolSettings) -> str | None:
    return settings.browser_executable or shutil.which("chromium")


@asynccontextmanager
async def _open(settings: ToolSettings) -> AsyncIterator[Browser]:
    try:
        from playwright.async_api import async_playwright
    except ImportError as exc:
        raise ToolError(
            "the browser tools need Playwright: install longhaul-agent[browser]",
            code="browser_unavailable",
        ) from exc
    timeout_ms = settings.browser_timeout_s * 1000
    async with async_playwright() as playwright:
        # Chromium's own sandbox needs an unprivileged user; as root it refuses to start
        args = [*ARGS, "--no-sandbox"] if os.geteuid() == 0 else ARGS
        try:
            browser = await playwright.chromium.launch(
                executable_path=_executable(settings), args=args, timeout=timeout_ms
            )
        except Exception as exc:
            raise ToolError(f"cannot start Chromium: {exc}", code="browser_unavailable") from exc
        try:
            context = await browser.new_context(service_workers="block")
            context.set_default_timeout(timeout_ms)
            page = await context.new_page()
            session = Browser(page, settings)
            await context.route("**/*", session.guard)
            await context.route_web_socket("**/*", session.guard_socket)
            try:
                yield session
            finally:
                await session.aclose()
        finally:
            await browser.close()


async def _session(ctx: ToolContext) -> Browser:
    return await ctx.resources.get("browser", lambda: _open(ctx.settings))


def _failed(action: str, exc: Exception) -> ToolError:
    from playwright.async_api import TimeoutError as PlaywrightTimeout

    code = "browser_timeout" if isinstance(exc, PlaywrightTimeout) else "browser_error"
    first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return ToolError(f"{action} failed: {first}", code=code)


async def _where(session: Browser) -> str:
    return f"{await session.page.title() or '(untitled)'} — {session.page.url}"


@tool
async def browser_navigate(ctx: ToolContext, url: str) -> ToolResult:
    """Open a web page in the browser (kept open for the other browser tools until your turn
    ends). Read it with browser_snapshot.

    Args:
        url: an absolute http:// or https:// URL.
    """
    session = await _session(ctx)
    reason = await session.check(url)
    if reason is not None or urlsplit(url).scheme not in ("http", "https"):
        raise ToolError(reason or f"unsupported URL {url!r}", code="address_refused")
    session.refused.clear()
    try:
        response = await session.page.goto(url, wait_until="load")
    except Exception as exc:
        if session.refused:
            raise ToolError(
                f"navigation to {url} refused: {session.refused[0]}", code="address_refused"
            ) from exc
        raise _failed(f"opening {url}", exc) from exc
    status = f"HTTP {response.status}" if response is not None else "no response"
    landed = session.landed.get(session.page.url)
    moved = f" (redirected to {landed})" if landed else ""
    return ToolResult(output=f"{status}: {await _where(session)}{moved}", title=f"browse {url}")


@tool
async def browser_snapshot(ctx: ToolContext) -> ToolResult:
    """The open page's content as text: its accessibility tree (headings, links, buttons,
    form fields with their names and values, text)."""
    session = await _session(ctx)
    try:
        tree = await session.page.locator("body").aria_snapshot()
    except Exception as exc:
        raise _failed("reading the page", exc) from exc
    text = f"{await _where(session)}\n\n{tree}"
    fitted = await fit_output(ctx, text.encode(), len(text.encode()), unit="bytes of text")
    return ToolResult(
        output=fitted.text,
        title=f"snapshot {session.page.url}",
        long_term_memory=f"read a snapshot of {session.page.url}",
        include_output_only_once=True,
    )


def _target(session: Browser, selector: str | None, text: str | None) -> Locator:
    page = session.page
    if selector is not None and text is None:
        return page.locator(selector).first
    if text is not None and selector is None:
        return page.get_by_text(text).first
    raise ToolError("give exactly one of selector or text", code="tool_call_invalid")


@tool
async def browser_click(
    ctx: ToolContext, selector: str | None = None, text: str | None = None
) -> ToolResult:
    """Click an element of the open page, named by a CSS selector or by its visible text.

    Args:
        selector: a CSS selector, e.g. "button#save".
        text: the element's visible text, e.g. "Sign in".
    """
    session = await _session(ctx)
    what = selector or text or ""
    try:
        await _target(session, selector, text).click()
        await session.page.wait_for_load_state()
    except ToolError:
        raise
    except Exception as exc:
        raise _failed(f"clicking {what!r}", exc) from exc
    return ToolResult(output=f"clicked {what!r}; now at {await _where(session)}", title="click")


@tool
async def browser_type(
    ctx: ToolContext, text: str, selector: str, submit: bool = False
) -> ToolResult:
    """Type into a form field of the open page (its previous value is replaced).

    Args:
        text: what to type.
        selector: a CSS selector of the field, e.g. "input[name=q]".
        submit: press Enter afterwards.
    """
    session = await _session(ctx)
    try:
        field = session.page.locator(selector).first
        await field.fill(text)
        if submit:
            await field.press("Enter")
            await session.page.wait_for_load_state()
    except Exception as exc:
        raise _failed(f"typing into {selector!r}", exc) from exc
    return ToolResult(output=f"typed into {selector!r}; at {await _where(session)}", title="type")


@tool
async def browser_screenshot(ctx: ToolContext) -> ToolResult:
    """A screenshot of the open page's viewport: the image is shown to you in the next
    message."""
    session = await _session(ctx)
    try:
        data = await session.page.screenshot(type="png")
    except Exception as exc:
        raise _failed("the screenshot", exc) from exc
    return ToolResult(
        output=f"screenshot of {await _where(session)} ({len(data)} bytes)",
        title="screenshot",
        attachments=(Attachment("screenshot.png", data, "image/png", show=True),),
    )


BROWSER_TOOLS = (
    browser_navigate,
    browser_snapshot,
    browser_click,
    browser_type,
    browser_screenshot,
)
