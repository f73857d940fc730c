"""Verification on any trace, with commands that are the operator's alone (issue 17 item 4,
issue 20 item 6), through the stack: the gateway, an executor process, the verifier service
and nats-server. A client names a configured check; a raw command, a directory or an
environment from a client is refused with 422 and nothing reaches the log."""

from __future__ import annotations

import shlex
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from longhaul.core.config import LonghaulConfig, NatsConfig
from longhaul.core.store import EventStore, Position
from longhaul.domain import events as ev
from longhaul.domain.config import VerifierCommand, VerifierConfig
from longhaul.domain.ids import new_id

from tests.integration.executor.scripts import write_script
from tests.integration.gateway.harness import serve_gateway, user_message
from tests.integration.planner.support import verifier_service
from tests.support.stack import ExecutorProcess, wait_for_trace

DEADLINE_S = 60
SECOND = "python3 -c " + shlex.quote(
    "import sys; got = sys.stdin.read().strip(); print('got', got); "
    "sys.exit(0 if got == 'second' else 1)"
)


@pytest.fixture
def work(tmp_path: Path) -> Path:
    path = tmp_path / "work"
    path.mkdir()
    return path


@pytest.fixture
def operator_config(nats_config: NatsConfig, work: Path) -> LonghaulConfig:
    return LonghaulConfig(
        nats=nats_config,
        working_root=work,
        verifier=VerifierConfig(commands={"is_second": VerifierCommand(command=SECOND)}),
    )


@pytest.fixture
async def http(operator_config: LonghaulConfig) -> AsyncIterator[httpx.AsyncClient]:
    async with serve_gateway(operator_config, heartbeat_s=0.3) as running:
        async with running.client() as client:
            yield client


async def settled(client: httpx.AsyncClient, store: EventStore, trace_id: str) -> dict[str, Any]:
    """The trace's view once its log says it ended."""
    await wait_for_trace(store, trace_id, within=DEADLINE_S)
    return dict((await client.get(f"/api/traces/{trace_id}")).json())


async def test_a_trace_names_an_operator_check_failure_is_reinjected_then_limited(
    http: httpx.AsyncClient,
    store: EventStore,
    operator_config: LonghaulConfig,
    nats_url: str,
    namespace: str,
    work: Path,
    tmp_path: Path,
) -> None:
    env = {"LONGHAUL_EXECUTOR__WORKING_ROOT": str(work)}

    def body(name: str, *answers: str) -> dict[str, Any]:
        turns = [{"content": text} for text in answers]
        return {
            "messages": [user_message("say second")],
            "model": write_script(tmp_path / f"{name}.yaml", turns),
            "verification": {"check": "is_second"},
        }

    async with (
        ExecutorProcess(nats_url, namespace, "exec-verify", env=env),
        verifier_service(operator_config),
    ):
        fixed = (await http.post("/api/traces", json=body("fixed", "first", "second"))).json()
        stubborn = (await http.post("/api/traces", json=body("stubborn", "one", "two"))).json()
        passed = await settled(http, store, fixed["trace_id"])
        failed = await settled(http, store, stubborn["trace_id"])
    assert passed["status"] == "completed", passed
    messages = (await http.get(f"/api/traces/{fixed['trace_id']}/messages")).json()["messages"]
    reinjected = [m for m in messages if m["role"] == "user"][1:]
    assert len(reinjected) == 1 and "did not pass verification" in reinjected[0]["content"]
    assert [m["content"] for m in messages if m["role"] == "assistant"] == ["first", "second"]
    # max_reinjections (1): the failure is re-injected once, the second failure ends the trace.
    assert failed["status"] == "failed"
    assert "verification failed after 2 attempt(s)" in failed["error"]


@pytest.mark.parametrize(
    "verification",
    [
        {"command": "cat /etc/shadow"},
        {"command": ["sh", "-c", "id"]},
        {"check": "is_second", "cwd": "/"},
        {"check": "is_second", "env": {"LD_PRELOAD": "/tmp/x.so"}},
        {"check": "is_second", "timeout_s": 86400},
        {"check": "is_second", "output_cap": 100000000},
        {"check": "no_such_check"},
        {"check": ""},
        "true",
    ],
)
async def test_a_client_cannot_supply_or_shape_a_command(
    http: httpx.AsyncClient,
    operator_config: LonghaulConfig,
    verification: Any,
    tmp_path: Path,
) -> None:
    before = (await http.get("/api/traces")).json()["traces"]
    response = await http.post(
        "/api/traces",
        json={"messages": [user_message("hi")], "verification": verification},
    )
    assert response.status_code == 422, response.text
    phases = [{"id": "p", "name": "p", "description": "d", "verification": verification}]
    task = await http.post("/api/tasks", json={"goal": "g", "options": {"phases": phases}})
    assert task.status_code == 422, task.text
    assert (await http.get("/api/traces")).json()["traces"] == before
    assert (await http.get("/api/tasks")).json()["tasks"] == []


async def test_a_raw_command_written_to_the_log_is_refused_by_the_verifier(
    store: EventStore,
    operator_config: LonghaulConfig,
    nats_url: str,
    namespace: str,
    work: Path,
    tmp_path: Path,
) -> None:
    """Past the gateway (an old event, a forged write): the verifier runs nothing."""
    planted = tmp_path / "ran"
    env = {"LONGHAUL_EXECUTOR__WORKING_ROOT": str(work)}
    created = ev.TraceCreated(
        messages=[ev.InputMessage(role="user", content="hi")],
        config=ev.TraceConfig(
            model=write_script(tmp_path / "once.yaml", [{"content": "done"}]),
            verification={"command": f"touch {planted}"},
        ),
    )
    trace_id = new_id("t")
    await store.append("trace", trace_id, [created], expected=Position())
    async with (
        ExecutorProcess(nats_url, namespace, "exec-raw", env=env),
        verifier_service(operator_config),
    ):
        state = await wait_for_trace(store, trace_id, within=DEADLINE_S)
    assert state.status == "failed"
    assert state.verification.failures and all(
        "commands are the operator's" in failure.errors[0]
        for failure in state.verification.failures
    )
    assert not planted.exists()
