"""webfetch refuses loopback, private and link-local targets (checked after resolving)."""

from __future__ import annotations

import asyncio
import ipaddress
from pathlib import Path

import pytest
from longhaul.agent.errors import ToolError
from longhaul.agent.tools import ToolResult, ToolSettings
from longhaul.agent.tools.netguard import checked_addresses, refused_reason
from longhaul.agent.tools.web import html_to_text, webfetch

from tests.unit.agent.support import tool_context


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("http://127.0.0.1:8080/admin", "loopback"),
        ("http://localhost/", "loopback"),
        ("http://[::1]/", "loopback"),
        ("http://10.1.2.3/", "private"),
        ("http://192.168.0.1/", "private"),
        ("http://172.16.5.4/", "private"),
        ("http://169.254.169.254/latest/meta-data/", "link-local"),
        ("http://[fe80::1]/", "link-local"),
        ("http://[::ffff:127.0.0.1]/", "loopback"),
        ("http://0.0.0.0/", "unspecified"),
        # Cloud metadata in the carrier-grade NAT block, and loopback wrapped in IPv6 forms.
        ("http://100.100.100.200/latest/meta-data/", "shared"),
        ("http://100.64.0.1/", "shared"),
        ("http://[2002:7f00:1::]/", "loopback"),
        ("http://[2002:a9fe:a9fe::1]/", "link-local"),
        ("http://[64:ff9b::7f00:1]/", "loopback"),
        ("http://[64:ff9b::a9fe:a9fe]/", "link-local"),
        ("http://[2001:0:4136:e378:8000:63bf:80ff:fffe]/", "loopback"),
        ("http://[::ffff:a9fe:a9fe]/", "link-local"),
        ("http://[::ffff:100.100.100.200]/", "shared"),
        ("http://192.0.0.1/", "private"),
        ("http://198.18.0.1/", "private"),
        ("http://[fc00::1]/", "private"),
        ("http://2130706433/", "loopback"),
    ],
)
async def test_refuses_internal_targets(tmp_path: Path, url: str, reason: str) -> None:
    with pytest.raises(ToolError) as refused:
        await webfetch.run(tool_context(tmp_path), {"url": url})
    assert refused.value.code == "address_refused"
    assert reason in str(refused.value) or "private" in str(refused.value)


async def test_every_resolved_address_is_checked() -> None:
    # localhost resolves to both 127.0.0.1 and ::1 on most systems: either one refuses it.
    with pytest.raises(ToolError, match="loopback"):
        await checked_addresses("localhost", 80, allow_private=False)


async def test_private_targets_allowed_when_configured() -> None:
    addresses = await checked_addresses("127.0.0.1", 80, allow_private=True)
    assert addresses == [ipaddress.ip_address("127.0.0.1")]


def test_public_addresses_pass() -> None:
    assert refused_reason(ipaddress.ip_address("93.184.216.34")) is None
    assert refused_reason(ipaddress.ip_address("2606:4700::1111")) is None
    # 6to4 and NAT64 of a public IPv4 address stay fetchable.
    assert refused_reason(ipaddress.ip_address("2002:5db8:d822::1")) is None
    assert refused_reason(ipaddress.ip_address("64:ff9b::5db8:d822")) is None


async def test_non_http_schemes_are_invalid_calls(tmp_path: Path) -> None:
    with pytest.raises(ToolError) as invalid:
        await webfetch.run(tool_context(tmp_path, settings=ToolSettings()), {"url": "file:///etc"})
    assert invalid.value.code == "tool_call_invalid"


def test_html_is_reduced_to_text() -> None:
    html = "<html><head><title>x</title><style>p{}</style></head><body><h1>Hi</h1><p>a &amp; b"
    assert html_to_text(html) == "Hi\na & b"


class LocalSite:
    """A tiny real HTTP server on loopback: / redirects to /page, which serves HTML."""

    def __init__(self) -> None:
        self.hosts: list[str] = []
        self.server: asyncio.Server | None = None

    async def __aenter__(self) -> str:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        port = self.server.sockets[0].getsockname()[1]
        return f"http://localhost:{port}/"

    async def __aexit__(self, *exc: object) -> None:
        assert self.server is not None
        self.server.close()
        await self.server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = (await reader.readuntil(b"\r\n\r\n")).decode()
        path = head.split(" ", 2)[1]
        self.hosts += [line[6:] for line in head.split("\r\n") if line.lower().startswith("host:")]
        if path == "/":
            response = "HTTP/1.1 302 Found\r\nLocation: /page\r\nContent-Length: 0\r\n\r\n"
        else:
            body = "<html><body><h1>Local</h1><p>hello</p></body></html>"
            response = (
                "HTTP/1.1 200 OK\r\nContent-Type: text/html; charset=utf-8\r\n"
                f"Content-Length: {len(body)}\r\n\r\n{body}"
            )
        writer.write(response.encode())
        await writer.drain()
        writer.close()


async def test_allowed_fetch_follows_redirects_pinned_to_the_checked_address(
    tmp_path: Path,
) -> None:
    site = LocalSite()
    async with site as url:
        settings = ToolSettings(webfetch_allow_private=True)
        result = await webfetch.run(tool_context(tmp_path, settings=settings), {"url": url})
    assert isinstance(result, ToolResult)
    assert result.output.startswith("[200 text/html; charset=utf-8]")
    assert result.output.endswith("Local\nhello")
    # Connected to the resolved address, but the server saw the name the URL used.
    port = url.rsplit(":", 1)[1].rstrip("/")
    assert site.hosts == [f"localhost:{port}", f"localhost:{port}"]
    assert result.include_output_only_once and "fetched" in str(result.long_term_memory)
