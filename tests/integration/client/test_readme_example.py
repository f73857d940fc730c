"""The README's Python client example runs as written against a live stack."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path
from typing import Any

import pytest

from tests.integration.gateway.harness import RunningGateway

README = Path(__file__).resolve().parents[3] / "README.md"
MARKER = "<!-- tested: tests/integration/client/test_readme_example.py -->"


def readme_example() -> str:
    text = README.read_text()
    match = re.search(re.escape(MARKER) + r"\n```python\n(.*?)```", text, re.DOTALL)
    assert match, "the README lost its tested client example"
    return match.group(1)


async def test_readme_example_runs(stack: RunningGateway, monkeypatch: pytest.MonkeyPatch) -> None:
    code = readme_example()
    assert len(code.splitlines()) <= 10
    monkeypatch.setenv("LONGHAUL_URL", stack.url)
    monkeypatch.delenv("LONGHAUL_API_KEY", raising=False)
    printed: list[str] = []

    def record(*args: Any) -> None:
        printed.append(" ".join(str(a) for a in args))

    namespace: dict[str, Any] = {"print": record}
    async with asyncio.timeout(60):
        await asyncio.to_thread(exec, compile(code, str(README), "exec"), namespace)
    assert all(line.split()[0].isdigit() for line in printed[:-1]), "only stored events"
    assert printed[0].split()[1] == "trace_created"
    assert printed[-2].split()[1] == "completed"
    status, tokens, *answer = printed[-1].split()
    assert status == "completed" and int(tokens) > 0 and answer
