"""Remote sub-agents across two real stacks on loopback: each a nats-server, a gateway and an
executor of its own. The local executor delegates over HTTP to the remote gateway
(``remote_agents``), records the child as ``agent://host:port/<id>``, waits without holding a
worker and reports the remote summary; ``continue_from`` continues the remote child; a failing
remote child, a wrong key (401), an unreachable remote and an unconfigured ``agent_url`` become
clear tool results; a parent messages its remote child through the remote's inbox API; a
spawn retried after the remote accepted it (the executor died before
linking it) leaves one remote trace; an executor killed (SIGKILL) while it waits is replaced
and the wait resumes; a forged link event is dropped once instead of being retried forever."""

from __future__ import annotations

import asyncio
import json
import re
import socket
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from longhaul.core.config import NatsConfig
from longhaul.domain.config import RemoteAgentConfig
from longhaul.domain.state import SubtraceInfo, TraceState
from longhaul.executor.remote import RemoteAgents, remote_trace_id
from longhaul.llm.scripted import ScriptedModel
from longhaul.llm.types import ModelRequest
from nats.js.errors import NotFoundError

from tests.integration.executor.scripts import write_script
from tests.integration.gateway.harness import (
    RunningGateway,
    gateway_config,
    serve_gateway,
    sse_events,
    user_message,
)
from tests.integration.gateway.test_full_stack import follow_until, is_final, main_path
from tests.support.nats import nats_server_url, unique_namespace
from tests.support.stack import ExecutorProcess, InProcessExecutor, eventually, test_config

LOCAL_KEY, REMOTE_KEY = "local-key-0123456789abcdef", "remote-key-0123456789abcdef"
KEY_ENV, WRONG_KEY_ENV = "LH_TEST_LAB_KEY", "LH_TEST_WRONG_LAB_KEY"
AGENT_ID = re.compile(r"agent://[\w.:-]+/t_\w+")


@dataclass
class RemoteStack:
    gateway: RunningGateway
    gate: asyncio.Event
    """A remote task containing "slow" answers only once this is set."""


def last_user(request: ModelRequest) -> str:
    return next(str(m["content"]) for m in reversed(request.messages) if m["role"] == "user")


async def remote_model(request: ModelRequest, gate: asyncio.Event) -> dict[str, Any]:
    task = last_user(request)
    if "fail" in task:
        return {"content": "refusing", "finish_reason": "content_filter"}
    if "slow" in task:
        await gate.wait()
    return {"content": f"remote did: {task}"}


@pytest.fixture(scope="module")
def remote_nats() -> Iterator[str]:
    with nats_server_url() as url:
        yield url


@pytest.fixture
async def remote(remote_nats: str, tmp_path: Path) -> AsyncIterator[RemoteStack]:
    namespace = unique_namespace()
    gate = asyncio.Event()
    nats = NatsConfig(url=remote_nats, namespace=namespace)
    async with (
        serve_gateway(gateway_config(nats, api_keys=REMOTE_KEY)) as gateway,
        InProcessExecutor(
            remote_nats,
            namespace,
            "exec-remote",
            settings={"working_root": tmp_path / "remote"},
            resolve_model=lambda _: ScriptedModel(lambda r: remote_model(r, gate)),
        ),
    ):
        yield RemoteStack(gateway, gate)


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def remotes(remote: RemoteStack) -> dict[str, RemoteAgentConfig]:
    return {
        "lab": RemoteAgentConfig(url=remote.gateway.url, api_key_env=KEY_ENV, poll_s=0.2),
        "badkey": RemoteAgentConfig(url=remote.gateway.url, api_key_env=WRONG_KEY_ENV),
        "down": RemoteAgentConfig(url=f"http://127.0.0.1:{closed_port()}", timeout_s=2),
    }


@pytest.fixture
async def local(nats_config: NatsConfig) -> AsyncIterator[RunningGateway]:
    async with serve_gateway(gateway_config(nats_config, api_keys=LOCAL_KEY)) as gateway:
        yield gateway


@pytest.fixture(autouse=True)
def remote_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_ENV, REMOTE_KEY)
    monkeypatch.setenv(WRONG_KEY_ENV, "not-the-remote-key-000000")


def agent_call(**arguments: Any) -> dict[str, Any]:
    return {"tool_calls": [{"name": "agent", "arguments": arguments}]}


def parent_model(request: ModelRequest) -> dict[str, Any]:
    """The parent's turns by position; the continue_from id is read from the first result."""
    step = sum(1 for m in request.messages if m["role"] == "assistant")
    tools = [str(m["content"]) for m in request.messages if m["role"] == "tool"]
    turns = [
        lambda: agent_call(task="count to 3", agent_url="lab"),
        lambda: agent_call(task="now count to 4", continue_from=AGENT_ID.findall(tools[0])[0]),
        lambda: agent_call(task="please fail", agent_url="lab"),
        lambda: agent_call(task="x", agent_url="http://relay.example:80"),
        lambda: agent_call(task="y", agent_url="badkey"),
        lambda: agent_call(task="z", agent_url="down"),
        lambda: {"content": "all done"},
    ]
    return turns[step]() if step < len(turns) else {"content": "exhausted"}


async def test_remote_children_complete_continue_fail_and_are_refused(
    local: RunningGateway, remote: RemoteStack, nats_url: str, namespace: str, tmp_path: Path
) -> None:
    config = test_config(nats_url, namespace, remote_agents=remotes(remote))
    async with (
        InProcessExecutor(
            nats_url,
            namespace,
            "exec-local",
            config=config,
            settings={"working_root": tmp_path / "local"},
            resolve_model=lambda _: ScriptedModel(parent_model),
        ),
        local.client(LOCAL_KEY) as client,
        remote.gateway.client(REMOTE_KEY) as remote_client,
    ):
        created = await client.post(
            "/api/traces", json={"messages": [user_message("delegate")], "model": "scripted:auto"}
        )
        parent = created.json()["trace_id"]
        events = await follow_until(client, parent, is_final)
        assert events[-1].event == "completed"
        results = [m for m in await main_path(client, parent) if m["role"] == "tool"]
        texts = [str(m["content"]) for m in results]
        [child] = AGENT_ID.findall(texts[0])
        host = remote.gateway.url.removeprefix("http://")
        assert child.startswith(f"agent://{host}/")
        assert f"Sub-agent {child} (delegate, completed):\nremote did: count to 3" in texts[0]
        assert f"Sub-agent {child} (delegate, completed):\nremote did: now count to 4" in texts[1]
        assert "(delegate, failed):\nfailed: the provider's content filter" in texts[2]
        assert "remote_not_configured" in texts[3] and "relay.example" in texts[3]
        assert "refused our API key (401)" in texts[4] and "(delegate, failed)" in texts[4]
        assert "is unreachable" in texts[5]
        assert [m["error_code"] for m in results[2:6]] == [
            "subtrace_failed",
            "remote_not_configured",
            "subtrace_failed",
            "subtrace_failed",
        ]

        view = (await client.get(f"/api/traces/{parent}")).json()
        subs = {s["trace_id"]: s for s in view["sub_traces"]}
        assert subs[child]["remote"] == "lab" and subs[child]["status"] == "completed"
        assert len(subs) == 4  # count/continue (one child), fail, 401, unreachable

        # The remote trace is real: both runs are on the remote's log, under the remote key.
        remote_view = (await remote_client.get(f"/api/traces/{child.rsplit('/', 1)[1]}")).json()
        assert remote_view["status"] == "completed" and remote_view["runs"] == 2


async def test_a_spawn_retried_after_the_remote_accepted_it_creates_one_remote_trace(
    local: RunningGateway,
    remote: RemoteStack,
    nats_url: str,
    namespace: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The executor dies (here: raises) right after the remote gateway's 202 and before the
    link is on the parent's log; the wake-up is redelivered, the spawn is sent again with the
    same Idempotency-Key, and the remote holds one trace, the one the parent reports."""
    accepted: list[str] = []
    real_start = RemoteAgents.start

    async def start_then_die(
        self: RemoteAgents, parent: TraceState, info: SubtraceInfo, name: str
    ) -> str:
        linked = await real_start(self, parent, info, name)
        assert isinstance(linked, str)  # a longhaul remote always links
        accepted.append(linked)
        if len(accepted) == 1:
            raise RuntimeError("executor died after the remote accepted the child")
        return linked

    monkeypatch.setattr(RemoteAgents, "start", start_then_die)
    model = write_script(
        tmp_path / "parent.yaml", [agent_call(task="once", agent_url="lab"), {"content": "ok"}]
    )
    config = test_config(nats_url, namespace, remote_agents=remotes(remote))
    async with (
        InProcessExecutor(
            nats_url,
            namespace,
            "exec-retry",
            config=config,
            settings={"working_root": tmp_path / "local"},
        ),
        local.client(LOCAL_KEY) as client,
        remote.gateway.client(REMOTE_KEY) as remote_client,
    ):
        created = await client.post(
            "/api/traces", json={"messages": [user_message("go")], "model": model}
        )
        parent = created.json()["trace_id"]
        events = await follow_until(client, parent, is_final)
        assert events[-1].event == "completed"
        assert len(accepted) == 2 and accepted[0] == accepted[1]
        [tool] = [str(m["content"]) for m in await main_path(client, parent) if m["role"] == "tool"]
        assert f"Sub-agent {accepted[0]} (delegate, completed):\nremote did: once" in tool
        listing = (await remote_client.get("/api/traces")).json()["traces"]
        assert [t["trace_id"] for t in listing] == [remote_trace_id(accepted[0])]


def messaging_parent(request: ModelRequest) -> dict[str, Any]:
    """Delegates, is woken by a message while it waits, and tells the remote child."""
    step = sum(1 for m in request.messages if m["role"] == "assistant")
    tools = " ".join(str(m["content"]) for m in request.messages if m["role"] == "tool")
    if step == 0:
        return agent_call(task="slow job", agent_url="lab")
    if step == 1:
        [child] = AGENT_ID.findall(tools)
        send = {"name": "send_message", "arguments": {"to": child, "content": "please hurry"}}
        return {"tool_calls": [send]}
    return {"content": "told it"}


async def test_a_parent_messages_its_remote_child_through_the_remote_inbox(
    local: RunningGateway, remote: RemoteStack, nats_url: str, namespace: str, tmp_path: Path
) -> None:
    config = test_config(nats_url, namespace, remote_agents=remotes(remote))
    async with (
        InProcessExecutor(
            nats_url,
            namespace,
            "exec-talk",
            config=config,
            settings={"working_root": tmp_path / "local"},
            resolve_model=lambda _: ScriptedModel(messaging_parent),
        ),
        local.client(LOCAL_KEY) as client,
        remote.gateway.client(REMOTE_KEY) as remote_client,
    ):
        try:
            created = await client.post(
                "/api/traces",
                json={
                    "messages": [user_message("go")],
                    "model": "scripted:auto",
                    "messaging": True,
                },
            )
            parent = created.json()["trace_id"]
            await follow_until(client, parent, lambda e, d: e == "remote_subtrace_linked")

            async def waiting() -> bool:
                view = (await client.get(f"/api/traces/{parent}")).json()
                return view["status"] == "waiting" and view["wait_reason"] == "subtraces"

            await eventually(waiting, within=10)
            woken = await client.post(
                f"/api/traces/{parent}/inbox", json={"from": "ops", "content": "x", "wake": True}
            )
            assert woken.status_code == 202
            assert (await follow_until(client, parent, is_final))[-1].event == "completed"
            tools = [
                str(m["content"]) for m in await main_path(client, parent) if m["role"] == "tool"
            ]
            [child] = AGENT_ID.findall(tools[0])
            assert tools[1] == f"Delivered to {child}."
            remote_view = (await remote_client.get(f"/api/traces/{remote_trace_id(child)}")).json()
            assert remote_view["messaging"] is True and remote_view["unread_messages"] == 1
        finally:
            remote.gate.set()


async def test_a_killed_executor_is_replaced_and_the_remote_wait_resumes(
    local: RunningGateway, remote: RemoteStack, nats_url: str, namespace: str, tmp_path: Path
) -> None:
    model = write_script(
        tmp_path / "parent.yaml",
        [agent_call(task="slow job", agent_url="lab"), {"content": "got the slow result"}],
    )
    env = {
        "LONGHAUL_REMOTE_AGENTS": json.dumps(
            {"lab": {"url": remote.gateway.url, "api_key_env": KEY_ENV, "poll_s": 0.2}}
        ),
        KEY_ENV: REMOTE_KEY,
        "LONGHAUL_EXECUTOR__WORKING_ROOT": str(tmp_path / "local"),
    }
    async with local.client(LOCAL_KEY) as client:
        first = ExecutorProcess(nats_url, namespace, "exec-doomed", env=env)
        await first.start()
        try:
            created = await client.post(
                "/api/traces", json={"messages": [user_message("go")], "model": model}
            )
            parent = created.json()["trace_id"]
            await follow_until(client, parent, lambda e, d: e == "remote_subtrace_linked")
        finally:
            await first.kill()
        # The remote child finishes while no local executor runs.
        remote.gate.set()
        async with ExecutorProcess(nats_url, namespace, "exec-successor", env=env):
            events = await follow_until(client, parent, is_final)
        assert events[-1].event == "completed"
        tools = [str(m["content"]) for m in await main_path(client, parent) if m["role"] == "tool"]
        assert "remote did: slow job" in tools[0]
        assert (await client.get(f"/api/traces/{parent}")).json()["summary"] == (
            "got the slow result"
        )


async def test_a_forged_link_is_dropped_not_retried_forever(
    nats_url: str, namespace: str, tmp_path: Path
) -> None:
    async with InProcessExecutor(
        nats_url, namespace, "exec-forged", settings={"working_root": tmp_path}
    ) as running:
        conn = running.ctx.conn if running.ctx is not None else None
        assert conn is not None
        names = conn.names
        await conn.js.publish(
            names.subject("trace", "t_forged", "remote_subtrace_linked"), b"{not json"
        )
        durable = f"{running.settings.durable}-remote"

        async def settled() -> Any:
            try:
                info = await conn.js.consumer_info(names.stream, durable)
            except NotFoundError:  # the remote waits' consumer is made as the executor starts
                return None
            return info if info.delivered.stream_seq and info.num_ack_pending == 0 else None

        info = await eventually(settled, within=20)
        assert info.num_redelivered == 0 and info.num_pending == 0


OTHER_KEY = "other-local-key-0123456789ab"


async def test_a_remote_child_is_read_through_the_local_gateway_by_its_parents_owner_only(
    remote: RemoteStack, nats_config: NatsConfig, nats_url: str, namespace: str, tmp_path: Path
) -> None:
    """``GET /api/traces/agent://host:port/<id>`` (its messages, its live stream) is proxied to
    the remote with the configured key while the child runs and after; another local key,
    even knowing the id, gets the 404 of an unknown trace."""
    model = write_script(
        tmp_path / "parent.yaml",
        [agent_call(task="slow job", agent_url="lab"), {"content": "got it"}],
    )
    config = test_config(nats_url, namespace, remote_agents=remotes(remote))
    gateway = gateway_config(nats_config, api_keys=f"{LOCAL_KEY},{OTHER_KEY}").model_copy(
        update={"remote_agents": remotes(remote)}
    )
    async with (
        serve_gateway(gateway) as local,
        InProcessExecutor(
            nats_url, namespace, "exec-reads", config=config, settings={"working_root": tmp_path}
        ),
        local.client(LOCAL_KEY) as client,
        local.client(OTHER_KEY) as other,
    ):
        created = await client.post(
            "/api/traces", json={"messages": [user_message("go")], "model": model}
        )
        parent = created.json()["trace_id"]
        mirror = local.runtime.mirror
        async with asyncio.timeout(20):  # the executor indexes the parent once it is linked
            await mirror.wait_until(
                lambda m: parent in m.entries and bool(m.entries[parent].remote_children)
            )
        [child] = mirror.entries[parent].remote_children
        path = f"/api/traces/{child}"

        # while it runs: its view as its parent names it, and its messages
        view = (await client.get(path)).json()
        assert view["trace_id"] == child and view["parent_trace_id"] == parent
        assert view["remote"] == "lab" and view["status"] in ("running", "waiting")
        messages = (await client.get(path + "/messages")).json()["messages"]
        assert messages[0]["content"] == "slow job"
        # the viewer's form (the id percent-encoded as one segment) reaches the same route
        encoded = (await client.get("/api/traces/" + quote(child, safe=""))).json()
        assert encoded["trace_id"] == child

        # another key: exactly an unknown trace, and the parent is never named
        unknown = f"agent://{child.split('/')[2]}/t_01UNKNOWN0000000000000000"
        for probe in (path, path + "/messages", path + "/events?follow=false"):
            refused = await other.get(probe)
            assert refused.status_code == 404, probe
            assert parent not in refused.text
        assert (await client.get(f"/api/traces/{unknown}")).status_code == 404

        # the live stream, relayed: the child's completion arrives through it
        async with (
            asyncio.timeout(20),
            client.stream("GET", path + "/events") as response,
        ):
            assert response.status_code == 200
            seen: list[str] = []
            async for event in sse_events(response):
                if event.event == "trace_created":
                    remote.gate.set()  # the stream is open: let the child finish
                if event.id is not None:
                    seen.append(event.event)
                if event.event == "completed":
                    assert "remote did: slow job" in event.json()["summary"]
                    break
        assert seen[0] == "trace_created" and "message_appended" in seen
        events = await follow_until(client, parent, is_final)
        assert events[-1].event == "completed"
        done = (await client.get(path + "/messages?mode=all")).json()["messages"]
        assert done[-1]["content"] == "remote did: slow job"
        assert (await client.get(path)).json()["status"] == "completed"
