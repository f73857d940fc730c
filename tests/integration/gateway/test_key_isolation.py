"""Per-key files through the stack: each API key's traces work in its own directory below the
working root; key B's trace cannot reach a file key A's trace wrote, by relative path, ``../``
traversal or absolute path, with the file tools or with bash; nor can a trace with no owner
(written to the log directly), which works in a directory of its own, never the root."""

from __future__ import annotations

import hashlib
import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from longhaul.core.config import NatsConfig
from longhaul.core.store import EventStore
from longhaul.gateway.auth import owner_id

from tests.integration.executor.scripts import write_script
from tests.integration.gateway.harness import (
    RunningGateway,
    gateway_config,
    serve_gateway,
    user_message,
)
from tests.integration.gateway.test_uploads import final_view
from tests.support.stack import InProcessExecutor, create_trace, wait_for_trace

KEY_A, KEY_B = "key-a-isolation-0123456789", "key-b-isolation-9876543210"
SECRET = "A-SECRET-4711"


@pytest.fixture
async def gateway(nats_config: NatsConfig) -> AsyncIterator[RunningGateway]:
    async with serve_gateway(gateway_config(nats_config, api_keys=f"{KEY_A},{KEY_B}")) as gw:
        yield gw


def owner_of(key: str) -> str:
    return owner_id(hashlib.sha256(key.encode()).digest())


def calls(*pairs: tuple[str, dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        {"tool_calls": [{"id": f"c{n}", "name": name, "arguments": arguments}]}
        for n, (name, arguments) in enumerate(pairs)
    ]


async def tool_outputs(client: Any, trace_id: str) -> list[str]:
    messages = (await client.get(f"/api/traces/{trace_id}/messages")).json()["messages"]
    return [str(m["content"]) for m in messages if m["role"] == "tool"]


async def test_key_b_cannot_reach_a_file_key_a_wrote(
    gateway: RunningGateway, store: EventStore, nats_url: str, namespace: str, tmp_path: Path
) -> None:
    work = tmp_path / "work"
    writer = write_script(
        tmp_path / "a.yaml",
        [
            *calls(
                ("write", {"path": "secret.txt", "content": SECRET}),
                ("read", {"path": "secret.txt"}),
            ),
            {"content": "written"},
        ],
    )
    async with (
        InProcessExecutor(nats_url, namespace, settings={"working_root": work}),
        gateway.client(KEY_A) as alice,
        gateway.client(KEY_B) as bob,
    ):
        body = {"messages": [user_message("keep a secret")], "model": writer}
        a_trace = (await alice.post("/api/traces", json=body)).json()["trace_id"]
        assert (await final_view(alice, store, a_trace))["status"] == "completed"
        a_file = work / "keys" / owner_of(KEY_A) / a_trace / "secret.txt"
        assert a_file.read_text() == SECRET
        assert any(SECRET in out for out in await tool_outputs(alice, a_trace))

        attempts = thefts(a_file, f"../../{owner_of(KEY_A)}/{a_trace}/secret.txt", work)
        reader = write_script(tmp_path / "b.yaml", [*attempts, {"content": "nothing found"}])
        body = {"messages": [user_message("find the secret")], "model": reader}
        b_trace = (await bob.post("/api/traces", json=body)).json()["trace_id"]
        assert (await final_view(bob, store, b_trace))["status"] == "completed"
        outputs = await tool_outputs(bob, b_trace)
        assert len(outputs) == len(attempts)
        assert not [out for out in outputs if SECRET in out]
        b_home = work / "keys" / owner_of(KEY_B) / b_trace
        assert b_home.is_dir() and not (b_home / "hard").exists()

        # A trace with no owner (only a direct log write makes one) is no better placed.
        attempts = thefts(a_file, f"../../keys/{owner_of(KEY_A)}/{a_trace}/secret.txt", work)
        stray = write_script(tmp_path / "c.yaml", [*attempts, {"content": "nothing found"}])
        c_trace = await create_trace(store, "find the secret", model=stray)
        state = await wait_for_trace(store, c_trace, within=60)
    assert state.status == "completed", state.error
    outputs = [str(m.content) for m in state.main_path() if m.role == "tool"]
    assert len(outputs) == len(attempts)
    assert not [out for out in outputs if SECRET in out or owner_of(KEY_B) in out]
    assert (work / "unowned" / c_trace).is_dir() and not (
        work / "unowned" / c_trace / "hard"
    ).exists()
    # Nothing above the trace's own directory was handed to the tools' user.
    assert {p.stat().st_uid for p in (work, work / "keys", a_file.parent, a_file)} == {os.getuid()}
    assert a_file.read_text() == SECRET


def thefts(a_file: Path, relative: str, work: Path) -> list[dict[str, Any]]:
    """Every way to reach ``a_file`` from another trace's directory (``relative`` from it)."""
    return calls(
        ("read", {"path": "secret.txt"}),
        ("read", {"path": f"../{a_file.parent.name}/secret.txt"}),
        ("read", {"path": relative}),
        ("read", {"path": str(a_file)}),
        ("glob", {"pattern": "**/secret.txt"}),
        ("grep", {"pattern": SECRET}),
        ("bash", {"command": f"cat secret.txt {relative} {a_file}; ls -aR ../.. {work}"}),
        ("bash", {"command": f"ln -s {a_file} link; cat link; ln {a_file} hard; cat hard"}),
        ("read", {"path": "link"}),
    )
