"""``webfetch``: GET a public URL and return its text, an HTML page as clean markdown-ish text.

The page's main content is extracted with trafilatura (boilerplate such as navigation, scripts
and footers dropped; headings, lists, tables and links kept as markdown); when it finds no main
content, its baseline converter gives all the visible text. Bytes are decoded by the charset of
the ``Content-Type`` header, else of the page's own ``<meta>`` declaration, else by detection.
The download stops at ``webfetch_max_bytes``; text over ``output_cap`` is offloaded like any
large output (:mod:`longhaul.agent.tools.offload`). The whole text is shown to the model once
(``include_output_only_once``); later requests carry a one-line note instead.

Every connection goes to an address :mod:`longhaul.agent.tools.netguard` allows, pinned so a
second DNS answer cannot swap it, and every redirect hop is checked again.
"""

from __future__ import annotations

import asyncio
import codecs
import re
from dataclasses import dataclass
from urllib.parse import urljoin, urlsplit

import httpx
from longhaul.agent.errors import ToolError
from longhaul.agent.tools.base import tool
from longhaul.agent.tools.context import ToolContext
from longhaul.agent.tools.decoding import ACCEPT_ENCODING, BoundedDecoder
from longhaul.agent.tools.netguard import IPAddress, checked_addresses
from longhaul.agent.tools.offload import fit_output
from longhaul.agent.tools.result import ToolResult

MAX_REDIRECTS = 5
META_CHARSET = re.compile(rb"""<meta[^>]+charset\s*=\s*["']?\s*([A-Za-z0-9_.:-]+)""", re.I)
SNIFF_BYTES = 4096
"""Where a ``<meta charset>`` must appear (the HTML standard says the first 1024 bytes)."""


def _known(encoding: str | None) -> str | None:
    if not encoding:
        return None
    try:
        return codecs.lookup(encoding).name
    except LookupError:
        return None


def decode(body: bytes, header_charset: str | None, *, html: bool) -> str:
    """The header's charset, else (HTML) the page's ``<meta>`` one, else detection."""
    declared = _known(header_charset)
    if declared is None and html:
        found = META_CHARSET.search(body[:SNIFF_BYTES])
        declared = _known(found.group(1).decode("ascii")) if found else None
    if declared is not None:
        return body.decode(declared, errors="replace")
    from trafilatura.utils import decode_file  # lazy: see html_to_text

    return decode_file(body)


def html_to_text(html: str, url: str) -> str:
    """Main content as markdown, else all visible text (CPU-bound: call it in a thread)."""
    # imported on first use: trafilatura (and lxml) is over a second of every service's start
    # that imports the built-in tools, gateway and executor alike
    import trafilatura

    text = trafilatura.extract(
        html,
        url=url,
        output_format="markdown",
        include_links=True,
        include_tables=True,
        favor_recall=True,
    )
    return text or trafilatura.html2txt(html)


def pinned(url: str, address: str) -> tuple[str, dict[str, str], dict[str, str]]:
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
    charset: str | None
    body: bytes
    complete: bool

    @property
    def is_html(self) -> bool:
        return "html" in self.kind or (not self.kind and self.body.lstrip()[:1] == b"<")

    async def text(self, url: str) -> str:
        decoded = decode(self.body, self.charset, html=self.is_html)
        if not self.is_html:
            return decoded
        return await asyncio.to_thread(html_to_text, decoded, url)


async def _get(
    client: httpx.AsyncClient, url: str, addresses: list[IPAddress], max_bytes: int
) -> str | _Page:
    """One GET pinned to the first checked address that accepts a connection: the redirect
    target, or the page."""
    last_error: httpx.HTTPError | None = None
    for address in addresses:
        target, headers, extensions = pinned(url, str(address))
        try:
            headers["Accept-Encoding"] = ACCEPT_ENCODING
            async with client.stream(
                "GET", target, headers=headers, extensions=extensions
            ) as response:
                if response.is_redirect and "location" in response.headers:
                    return urljoin(url, response.headers["location"])
                # raw bytes, decoded here with a bound: httpx would inflate a chunk whole
                decoder = BoundedDecoder(response.headers.get("content-encoding", ""), max_bytes)
                body = bytearray()
                received = 0
                async for chunk in response.aiter_raw():
                    received += len(chunk)
                    body += decoder.feed(chunk)
                    if decoder.cut or received >= max_bytes:
                        break
                complete = not decoder.cut and received < max_bytes
                kind = response.headers.get("content-type", "")
                return _Page(
                    response.status_code,
                    kind,
                    response.charset_encoding,
                    bytes(body[:max_bytes]),
                    complete,
                )
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
            return await _result(ctx, current, fetched)
    raise ToolError(f"too many redirects fetching {url}", code="fetch_failed")


async def _result(ctx: ToolContext, url: str, page: _Page) -> ToolResult:
    text = await page.text(url)
    cut = "" if page.complete else f" [download stopped at {len(page.body)} bytes]"
    data = text.encode()
    fitted = await fit_output(ctx, data, len(data), unit="bytes of text")
    kind = page.kind or "unknown type"
    again = fitted.notice or "fetch again to read it"
    return ToolResult(
        output=f"[{page.status} {kind}] {url}{cut}\n\n{fitted.text}",
        title=f"fetch {url}",
        long_term_memory=(
            f"fetched {url} ({page.status}, {len(data)} bytes of text); its text was shown "
            f"once: {again}"
        ),
        include_output_only_once=True,
        error_code=None if page.status < 400 else "http_error",
    )
