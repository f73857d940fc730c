"""``webfetch``: GET a public URL and return its text (HTML reduced to readable text)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from html.parser import HTMLParser
from urllib.parse import urljoin, urlsplit

import httpx
from longhaul.agent.errors import ToolError
from longhaul.agent.tools.base import tool
from longhaul.agent.tools.context import ToolContext
from longhaul.agent.tools.netguard import IPAddress, checked_addresses
from longhaul.agent.tools.result import ToolResult

MAX_REDIRECTS = 5
_SKIP = {"script", "style", "noscript", "svg", "head"}
_BLOCK = {"p", "div", "br", "li", "tr", "h1", "h2", "h3", "h4", "h5", "h6", "section", "pre"}


class _Text(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self._skip = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in _SKIP:
            self._skip += 1
        elif tag in _BLOCK:
            self.parts.append("\n")

    def handle_endtag(self, tag: str) -> None:
        if tag in _SKIP and self._skip:
            self._skip -= 1

    def handle_data(self, data: str) -> None:
        if not self._skip:
            self.parts.append(data)


def html_to_text(html: str) -> str:
    parser = _Text()
    parser.feed(html)
    text = "".join(parser.parts)
    return re.sub(r"\n\s*\n+", "\n\n", re.sub(r"[ \t]+", " ", text)).strip()


def _pinned(url: str, address: str) -> tuple[str, dict[str, str], dict[str, str]]:
    """The URL rewritten to the checked address, the Host header and TLS server name."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    literal = f"[{address}]" if ":" in address else address
    netloc = literal if parts.port is None else f"{literal}:{parts.port}"
    pinned = parts._replace(netloc=netloc).geturl()
    host_header = host if parts.port is None else f"{host}:{parts.port}"
    return pinned, {"Host": host_header}, {"sni_hostname": host}


@dataclass(frozen=True, slots=True)
class _Page:
    status: int
    kind: str
    encoding: str
    body: bytes

    def text(self) -> str:
        text = self.body.decode(self.encoding, errors="replace")
        return html_to_text(text) if "html" in self.kind else text


async def _get(
    client: httpx.AsyncClient, url: str, addresses: list[IPAddress], max_bytes: int
) -> str | _Page:
    """One GET pinned to the first checked address that accepts a connection: the redirect
    target, or the page."""
    last_error: httpx.HTTPError | None = None
    for address in addresses:
        pinned, headers, extensions = _pinned(url, str(address))
        try:
            async with client.stream(
                "GET", pinned, headers=headers, extensions=extensions
            ) as response:
                if response.is_redirect and "location" in response.headers:
                    return urljoin(url, response.headers["location"])
                body = bytearray()
                async for chunk in response.aiter_bytes():
                    body.extend(chunk)
                    if len(body) >= max_bytes:
                        break
                kind = response.headers.get("content-type", "")
                return _Page(response.status_code, kind, response.encoding or "utf-8", bytes(body))
        except httpx.ConnectError as exc:
            last_error = exc
        except httpx.HTTPError as exc:
            raise ToolError(f"fetching {url} failed: {exc}", code="fetch_failed") from exc
    raise ToolError(f"fetching {url} failed: {last_error}", code="fetch_failed")


@tool(read_only=True)
async def webfetch(ctx: ToolContext, url: str) -> ToolResult:
    """Fetch a web page or file over http(s) and return its text.

    Args:
        url: an absolute http:// or https:// URL.
    """
    settings = ctx.settings
    seconds = settings.webfetch_timeout_s
    timeout = httpx.Timeout(seconds, connect=min(10.0, seconds))
    async with httpx.AsyncClient(timeout=timeout, follow_redirects=False) as client:
        current = url
        for _ in range(MAX_REDIRECTS + 1):
            parts = urlsplit(current)
            if parts.scheme not in ("http", "https") or not parts.hostname:
                raise ToolError(
                    f"unsupported URL {current!r}: use http(s)://host/…", code="tool_call_invalid"
                )
            port = parts.port or (443 if parts.scheme == "https" else 80)
            addresses = await checked_addresses(
                parts.hostname, port, allow_private=settings.webfetch_allow_private
            )
            fetched = await _get(client, current, addresses, settings.webfetch_max_bytes)
            if isinstance(fetched, str):
                current = fetched
                continue
            return ToolResult(
                output=f"[{fetched.status} {fetched.kind}] {current}\n\n{fetched.text()}",
                title=f"fetch {current}",
                long_term_memory=f"fetched {current} ({fetched.status}, {len(fetched.body)} bytes)",
                include_output_only_once=True,
                error_code=None if fetched.status < 400 else "http_error",
            )
    raise ToolError(f"too many redirects fetching {url}", code="fetch_failed")
