"""``/a2a`` as outside A2A tools see it, each in a test-only venv (pip, pinned, from PyPI):
``a2a-lint`` grades the agent card and does a live ``message/send`` round trip, and the
a2a-sdk 0.3.26 client (the workspace holds 1.x) connects by the base URL alone and gets its
answer. ``a2a-lint`` sends no key, so it runs against a keyless gateway (loopback only)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from longhaul.core.config import NatsConfig

from tests.integration.executor.scripts import write_script
from tests.integration.gateway.harness import KEY_A, RunningGateway, gateway_config, serve_gateway
from tests.support.stack import InProcessExecutor
from tests.support.venvs import venv_with

A2A_SDK_03 = "a2a-sdk==0.3.26"
A2A_LINT = "a2a-lint==0.1.1"
DEADLINE_S = 120


async def _run(*command: str) -> tuple[int, str]:
    process = await asyncio.create_subprocess_exec(
        *command, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT
    )
    async with asyncio.timeout(DEADLINE_S):
        output, _ = await process.communicate()
    assert process.returncode is not None
    return process.returncode, output.decode(errors="replace")


@pytest.fixture
async def keyless_stack(
    nats_config: NatsConfig, nats_url: str, namespace: str, tmp_path: Path
) -> AsyncIterator[RunningGateway]:
    async with serve_gateway(gateway_config(nats_config, completion_timeout_s=5)) as gateway:
        async with InProcessExecutor(
            nats_url, namespace, "exec-a2a-lint", settings={"working_root": tmp_path / "work"}
        ):
            yield gateway


async def test_a2a_lint_finds_no_error_in_the_card_or_a_live_call(
    keyless_stack: RunningGateway,
) -> None:
    lint = str(venv_with(A2A_LINT, A2A_SDK_03) / "a2a-lint")
    # --strict: a warning fails it too
    code, report = await _run(lint, keyless_stack.url, "--live", "--strict", "--json")
    assert code == 0, report
    graded = json.loads(report)
    assert graded["ok"] and graded["summary"] == {"errors": 0, "warnings": 0, "grade": "A"}
    assert graded["streamEvents"] > 0  # the card declares streaming: message/stream was checked


async def test_an_a2a_sdk_0_3_client_connects_by_base_url_and_gets_its_answer(
    keyed_stack: RunningGateway, tmp_path: Path
) -> None:
    python = str(venv_with(A2A_LINT, A2A_SDK_03) / "python")
    hello = write_script(tmp_path / "hello.yaml", [{"content": "hello from longhaul"}])
    script = Path(__file__).with_name("a2a_v03_client.py")
    code, output = await _run(python, str(script), keyed_stack.url, KEY_A, hello)
    assert code == 0, output
    task = json.loads(output.strip().splitlines()[-1])
    assert task["status"]["state"] == "completed", task
    texts = [p["text"] for a in task.get("artifacts", []) for p in a["parts"] if "text" in p]
    assert texts == ["hello from longhaul"]
