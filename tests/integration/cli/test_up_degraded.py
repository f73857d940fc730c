"""`longhaul up` says in one line when the stack is up but its tool processes are refused: the
banner reads `/readyz` from a real HTTP server answering as a degraded gateway does."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest
from longhaul.cli.up import banner, degraded_line, wait_for_gateway
from longhaul.core.config import LonghaulConfig
from rich.console import Console

from tests.support.counting_server import JsonHandler, serving

REASON = "unavailable: bubblewrap (bwrap) is not installed or not on PATH"


@pytest.fixture
def degraded_gateway() -> Iterator[str]:
    class Degraded(JsonHandler):
        def do_GET(self) -> None:
            self.answer(200, {"status": "degraded", "checks": {"sandbox": REASON}})

    with serving(Degraded) as url:
        yield url


async def test_the_banner_says_degraded_with_the_reason(
    degraded_gateway: str, tmp_path: Path
) -> None:
    readiness = await wait_for_gateway(degraded_gateway, asyncio.Event())
    assert readiness is not None and readiness["status"] == "degraded"
    line = degraded_line(readiness)
    assert line is not None and REASON in line
    panel = banner(
        LonghaulConfig(),
        gateway_url=degraded_gateway,
        nats_url="nats://127.0.0.1:4222",
        embedded=True,
        data_dir=tmp_path,
        executors=1,
        work_dir=tmp_path / "work",
        ready=True,
        degraded=line,
    )
    console = Console(width=300, record=True)
    console.print(panel)
    [shown] = [row for row in console.export_text().splitlines() if "degraded:" in row]
    assert "refused" in shown and REASON in shown
    # ready and confined: no such line
    assert degraded_line({"status": "ok", "checks": {"sandbox": "ok"}}) is None
