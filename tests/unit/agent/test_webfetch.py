"""webfetch refuses loopback, private and link-local targets (checked after resolving)."""

from __future__ import annotations

import ipaddress
from pathlib import Path

import pytest
from longhaul.agent.errors import ToolError
from longhaul.agent.tools import ToolSettings
from longhaul.agent.tools.netguard import checked_address, refused_reason
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
        await checked_address("localhost", 80, allow_private=False)


async def test_private_targets_allowed_when_configured() -> None:
    address = await checked_address("127.0.0.1", 80, allow_private=True)
    assert address == ipaddress.ip_address("127.0.0.1")


def test_public_addresses_pass() -> None:
    assert refused_reason(ipaddress.ip_address("93.184.216.34")) is None
    assert refused_reason(ipaddress.ip_address("2606:4700::1111")) is None


async def test_non_http_schemes_are_invalid_calls(tmp_path: Path) -> None:
    with pytest.raises(ToolError) as invalid:
        await webfetch.run(tool_context(tmp_path, settings=ToolSettings()), {"url": "file:///etc"})
    assert invalid.value.code == "tool_call_invalid"


def test_html_is_reduced_to_text() -> None:
    html = "<html><head><title>x</title><style>p{}</style></head><body><h1>Hi</h1><p>a &amp; b"
    assert html_to_text(html) == "Hi\na & b"
