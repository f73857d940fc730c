"""Remote sub-agents over A2A (``remote_agents`` with ``protocol: a2a``): a longhaul parent
delegates through ``a2a-sdk``'s client to a small agent built with ``a2a-sdk``'s server (its
own thread) and to another longhaul's ``/a2a`` (a second stack: nats namespace, gateway,
executor). Answers come back as the parent's tool results, an answer over the entry's
``max_response_bytes`` as a failed child, unread; the SDK agent's question
(input-required) reaches the parent, which answers it with ``continue_from`` on the same task;
and an executor killed (SIGKILL) while both waits are pending is replaced, the waits resume,
and no task is sent twice."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from longhaul.domain.config import RemoteAgentConfig
from longhaul.executor.remote import remote_trace_id
from longhaul.llm.scripted import ScriptedModel
from longhaul.llm.types import ModelRequest

from tests.integration.executor.scripts import write_script
from tests.integration.gateway.harness import RunningGateway, user_message
from tests.integration.gateway.test_full_stack import follow_until, is_final, main_path
from tests.integration.remote.a2a_agent import serve_sdk_agent
from tests.integration.remote.test_remote_agents import (  # noqa: F401 (fixtures)
    KEY_ENV,
    LOCAL_KEY,
    REMOTE_KEY,
    RemoteStack,
    agent_call,
    local,
    remote,
    remote_keys,
    remote_nats,
)
from tests.support.stack import ExecutorProcess, InProcessExecutor, test_config

AGENT_ID = re.compile(r"agent://[\w.:-]+/[\w%-]+")


def a2a_remotes(sdk_url: str, stack: RemoteStack) -> dict[str, Any]:
    return {
        "sdk": {"url": sdk_url, "protocol": "a2a", "poll_s": 0.2},
        "lh": {"url": stack.gateway.url, "protocol": "a2a", "api_key_env": KEY_ENV, "poll_s": 0.2},
    }


def parent_model(request: ModelRequest) -> dict[str, Any]:
    """The parent's turns by position; the continue_from id is read from the question."""
    step = sum(1 for m in request.messages if m["role"] == "assistant")
    tools = [str(m["content"]) for m in request.messages if m["role"] == "tool"]
    turns = [
        lambda: agent_call(task="say hi", agent_url="sdk"),
        lambda: agent_call(task="please ask me", agent_url="sdk"),
        lambda: agent_call(task="large", continue_from=AGENT_ID.findall(tools[1])[0]),
        lambda: agent_call(task="count to 3", agent_url="lh"),
        lambda: agent_call(task="a huge answer", agent_url="sdk"),
        lambda: {"content": "all done"},
    ]
    return turns[step]() if step < len(turns) else {"content": "exhausted"}


async def test_delegates_to_an_sdk_agent_and_a_longhaul_answering_a_question(
    local: RunningGateway,  # noqa: F811
    remote: RemoteStack,  # noqa: F811
    nats_url: str,
    namespace: str,
    tmp_path: Path,
) -> None:
    async with serve_sdk_agent() as (sdk_url, sdk):
        remotes = {
            name: RemoteAgentConfig.model_validate(entry)
            for name, entry in a2a_remotes(sdk_url, remote).items()
        }
        async with (
            InProcessExecutor(
                nats_url,
                namespace,
                "exec-a2a",
                config=test_config(nats_url, namespace, remote_agents=remotes),
                settings={"working_root": tmp_path / "local"},
                resolve_model=lambda _: ScriptedModel(parent_model),
            ),
            local.client(LOCAL_KEY) as client,
            remote.gateway.client(REMOTE_KEY) as remote_client,
        ):
            created = await client.post(
                "/api/traces",
                json={"messages": [user_message("delegate")], "model": "scripted:auto"},
            )
            parent = created.json()["trace_id"]
            events = await follow_until(client, parent, is_final)
            assert events[-1].event == "completed"
            texts = [
                str(m["content"]) for m in await main_path(client, parent) if m["role"] == "tool"
            ]
            [hi] = AGENT_ID.findall(texts[0])
            assert hi.startswith(f"agent://{sdk_url.removeprefix('http://')}/")
            assert f"Sub-agent {hi} (delegate, completed):\nsdk did: say hi" in texts[0]
            asked = AGENT_ID.findall(texts[1])[0]
            assert "The A2A agent needs input: which size?" in texts[1]
            assert f"continue_from={asked!r}" in texts[1]
            # the answer went to the same task, which then completed
            assert f"Sub-agent {asked} (delegate, completed):\nsize noted: large" in texts[2]
            assert sdk.received == ["say hi", "please ask me", "large", "a huge answer"]
            [lh] = AGENT_ID.findall(texts[3])
            assert "remote did: count to 3" in texts[3]
            # the other longhaul ran it as a normal trace of the key the parent used
            view = (await remote_client.get(f"/api/traces/{remote_trace_id(lh)}")).json()
            assert view["status"] == "completed"
            # an answer over max_response_bytes (1 MiB) is not read: the child fails, saying so
            huge = [m for m in await main_path(client, parent) if m["role"] == "tool"][4]
            assert huge["error_code"] == "subtrace_failed" and len(str(huge["content"])) < 2000
            said = str(huge["content"])
            assert "more than 1048576 (remote_agents.sdk.max_response_bytes): not read" in said


async def test_a_killed_executor_resumes_both_a2a_waits(
    local: RunningGateway,  # noqa: F811
    remote: RemoteStack,  # noqa: F811
    nats_url: str,
    namespace: str,
    tmp_path: Path,
) -> None:
    both = {
        "tool_calls": [
            {"name": "agent", "arguments": {"task": "slow sdk job", "agent_url": "sdk"}},
            {"name": "agent", "arguments": {"task": "slow lh job", "agent_url": "lh"}},
        ]
    }
    model = write_script(tmp_path / "parent.yaml", [both, {"content": "got both"}])
    async with serve_sdk_agent() as (sdk_url, sdk), local.client(LOCAL_KEY) as client:
        env = {
            "LONGHAUL_REMOTE_AGENTS": json.dumps(a2a_remotes(sdk_url, remote)),
            KEY_ENV: REMOTE_KEY,
            "LONGHAUL_EXECUTOR__WORKING_ROOT": str(tmp_path / "local"),
        }
        first = ExecutorProcess(nats_url, namespace, "exec-a2a-doomed", env=env)
        await first.start()
        linked: list[str] = []

        def both_linked(event: str, data: dict[str, Any]) -> bool:
            if event == "remote_subtrace_linked":
                linked.append(data["remote_id"])
            return len(linked) == 2

        try:
            created = await client.post(
                "/api/traces", json={"messages": [user_message("go")], "model": model}
            )
            parent = created.json()["trace_id"]
            await follow_until(client, parent, both_linked)
        finally:
            await first.kill()
        # both remote tasks finish while no local executor runs
        sdk.gate.set()
        remote.gate.set()
        # the successor runs in this process (one executor start less)
        remotes = {
            name: RemoteAgentConfig.model_validate(entry)
            for name, entry in a2a_remotes(sdk_url, remote).items()
        }
        async with InProcessExecutor(
            nats_url,
            namespace,
            "exec-a2a-successor",
            config=test_config(nats_url, namespace, remote_agents=remotes),
            settings={"working_root": tmp_path / "local"},
        ):
            events = await follow_until(client, parent, is_final)
        assert events[-1].event == "completed"
        tools = " ".join(
            str(m["content"]) for m in await main_path(client, parent) if m["role"] == "tool"
        )
        assert "sdk did: slow sdk job" in tools and "remote did: slow lh job" in tools
        assert sdk.received == ["slow sdk job"]  # sent once, polled again after the restart
        async with remote.gateway.client(REMOTE_KEY) as remote_client:
            listing = (await remote_client.get("/api/traces")).json()["traces"]
        assert len(listing) == 1
