"""webfetch refuses loopback, private and link-local targets (checked after resolving), and
reads pages from a real local HTTP server as clean text: main content as markdown, charset
from the header or the page's ``<meta>``, downloads and outputs capped."""

from __future__ import annotations

import gzip
import ipaddress
import tracemalloc
import zlib
from pathlib import Path
from typing import Any

import pytest
from longhaul.agent.errors import ToolError
from longhaul.agent.tools import ToolResult, ToolSettings
from longhaul.agent.tools.netguard import checked_addresses, refused_reason
from longhaul.agent.tools.web import decode, html_to_text, webfetch

from tests.support.pages import LocalSite, Page
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


@pytest.mark.parametrize(
    "address",
    [
        "192.0.0.192",
        "192.0.0.8",
        "192.0.2.7",
        "198.51.100.1",
        "203.0.113.9",
        "192.88.99.1",
        "100::1",
        "3fff::1",
        "5f00::1",
        "2001:2::1",
        "2001:db8::1",
    ],
)
async def test_special_purpose_blocks_are_refused_whatever_the_python(
    tmp_path: Path, address: str
) -> None:
    """3.11.7's ``ipaddress`` calls 192.0.0.192 global: the guard keeps its own list."""
    assert refused_reason(ipaddress.ip_address(address)) is not None
    host = f"[{address}]" if ":" in address else address
    with pytest.raises(ToolError) as refused:
        await webfetch.run(tool_context(tmp_path), {"url": f"http://{host}/"})
    assert refused.value.code == "address_refused"


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


ARTICLE = """<html><head><title>Coffee</title><style>p{color:red}</style>
<script>var tracking = 1;</script></head><body>
<nav><a href="/">Home</a> | <a href="/about">About</a></nav>
<article><h1>Brewing coffee</h1>
<p>Grind the beans just before brewing; a medium grind suits a filter and keeps the taste.</p>
<p>Pour water at about 94 degrees over the grounds, see <a href="/ratio">the ratio guide</a>.</p>
<ul><li>beans</li><li>water</li></ul></article>
<footer>Copyright 2026 Example Corp</footer></body></html>"""


def test_html_becomes_markdown_without_boilerplate() -> None:
    text = html_to_text(ARTICLE, "http://example.test/coffee")
    assert text.startswith("# Brewing coffee")
    assert "[the ratio guide](http://example.test/ratio)" in text
    assert "- beans\n- water" in text
    assert "tracking" not in text and "color:red" not in text and "Copyright" not in text


def test_charset_from_header_then_meta_then_detection() -> None:
    latin = "<html><head><meta charset='iso-8859-1'></head><body><p>café</p></body></html>"
    body = latin.encode("latin-1")
    assert "café" in decode(body, None, html=True)
    assert "café" in decode(body, "ISO-8859-1", html=True)
    # the header wins over the page's own declaration
    cyrillic = "<meta charset=utf-8><p>привет</p>".encode("cp1251")
    assert "привет" in decode(cyrillic, "windows-1251", html=True)
    assert decode("plain ünïcode".encode(), None, html=False) == "plain ünïcode"
    assert "café" in decode(body, "no-such-charset", html=True)  # unknown: the meta one


async def test_allowed_fetch_follows_redirects_pinned_to_the_checked_address(
    tmp_path: Path,
) -> None:
    site = LocalSite()
    async with site as url:
        settings = ToolSettings(webfetch_allow_private=True)
        result = await webfetch.run(tool_context(tmp_path, settings=settings), {"url": url})
    assert isinstance(result, ToolResult)
    assert result.output.startswith("[200 text/html; charset=utf-8]")
    assert result.output.endswith("# Local\n\nhello")
    # Connected to the resolved address, but the server saw the name the URL used.
    port = url.rsplit(":", 1)[1].rstrip("/")
    assert site.hosts == [f"localhost:{port}", f"localhost:{port}"]
    assert result.include_output_only_once and "fetched" in str(result.long_term_memory)


async def fetch(tmp_path: Path, pages: dict[str, Page], path: str, **settings: Any) -> ToolResult:
    async with LocalSite(pages) as url:
        options = ToolSettings(webfetch_allow_private=True, **settings)
        result = await webfetch.run(tool_context(tmp_path, settings=options), {"url": url + path})
    assert isinstance(result, ToolResult)
    return result


async def test_a_page_is_read_as_clean_text_once(tmp_path: Path) -> None:
    result = await fetch(tmp_path, {"/coffee": ("text/html", ARTICLE.encode())}, "coffee")
    assert "# Brewing coffee" in result.output and "Copyright" not in result.output
    assert result.include_output_only_once
    memory = result.long_term_memory or ""
    assert memory.startswith("fetched http://localhost:") and len(memory) < 200


async def test_meta_charset_is_honoured(tmp_path: Path) -> None:
    page = "<html><head><meta charset=windows-1252></head><body><p>Ça coûte 5 €.</p></body>"
    result = await fetch(tmp_path, {"/fr": ("text/html", page.encode("cp1252"))}, "fr")
    assert "Ça coûte 5 €." in result.output


async def test_download_and_output_are_capped(tmp_path: Path) -> None:
    big = ("line of text\n" * 20_000).encode()
    result = await fetch(
        tmp_path, {"/big.txt": ("text/plain", big)}, "big.txt", webfetch_max_bytes=100_000
    )
    assert "[download stopped at 100000 bytes]" in result.output
    assert "output is 100000 bytes of text in all" in result.output
    assert len(result.output) < 31_000


def gzip_bomb(decoded_mib: int, layers: int) -> bytes:
    """``decoded_mib`` MiB of zeros, gzipped ``layers`` times, built without holding them."""
    packer = zlib.compressobj(9, zlib.DEFLATED, zlib.MAX_WBITS | 16)
    zeros = bytes(1 << 20)
    body = b"".join(packer.compress(zeros) for _ in range(decoded_mib)) + packer.flush()
    for _ in range(layers - 1):
        body = gzip.compress(body, 9)
    return body


@pytest.mark.parametrize(("layers", "encoding"), [(1, "gzip"), (2, "gzip, gzip")])
async def test_a_decompression_bomb_is_cut_at_the_cap_while_decoding(
    tmp_path: Path, layers: int, encoding: str
) -> None:
    """256 MiB of zeros arrive as a few hundred KB (one layer) or a few KB (two): httpx would
    inflate each network chunk whole before the cap looks at it; decoding here stops at it."""
    bomb = gzip_bomb(256, layers)
    assert len(bomb) < 300_000
    site = LocalSite(
        {"/bomb.txt": ("text/plain", bomb)}, headers={"/bomb.txt": {"Content-Encoding": encoding}}
    )
    tracemalloc.start()
    try:
        async with site as url:
            options = ToolSettings(webfetch_allow_private=True, webfetch_max_bytes=1_000_000)
            result = await webfetch.run(
                tool_context(tmp_path, settings=options), {"url": url + "bomb.txt"}
            )
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert isinstance(result, ToolResult)
    assert "[download stopped at 1000000 bytes]" in result.output
    assert peak < 64 * 2**20, f"peak {peak / 2**20:.0f} MiB while decoding a 256 MiB bomb"
    assert site.accept_encodings == ["gzip, deflate"]


async def test_an_encoding_that_was_not_asked_for_is_refused(tmp_path: Path) -> None:
    site = LocalSite(
        {"/z": ("text/plain", b"(\xb5/\xfd...")}, headers={"/z": {"Content-Encoding": "zstd"}}
    )
    async with site as url:
        options = ToolSettings(webfetch_allow_private=True)
        with pytest.raises(ToolError) as refused:
            await webfetch.run(tool_context(tmp_path, settings=options), {"url": url + "z"})
    assert refused.value.code == "fetch_failed" and "zstd" in str(refused.value)


async def test_compressed_pages_still_read(tmp_path: Path) -> None:
    text = (
        b"<html><body><article><h1>Tea</h1><p>"
        + b"steep it well. " * 200
        + b"</p></article></body></html>"
    )
    for encoding, body in (("gzip", gzip.compress(text)), ("deflate", zlib.compress(text))):
        site = LocalSite(
            {"/t": ("text/html", body)}, headers={"/t": {"Content-Encoding": encoding}}
        )
        async with site as url:
            options = ToolSettings(webfetch_allow_private=True)
            result = await webfetch.run(
                tool_context(tmp_path, settings=options), {"url": url + "t"}
            )
        assert isinstance(result, ToolResult) and "steep it well" in result.output, encoding
