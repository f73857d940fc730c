"""``/a2a`` driven by the official ``a2a-sdk`` client against a real gateway and executor on a
scripted model: the card, a blocking send that completes with the answer as an artifact, a
streamed task that asks a question (input-required), answered by the next message on the same
task, a cancel, v0.3's method names, a v0.3 client that finds the agent by its card (and a 1.0
client that still picks 1.0), a message sent again (same ``messageId``) that finds its task,
two API keys that never see each other's tasks, and bad input answered with JSON-RPC error
objects."""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from a2a.client import Client, ClientConfig, ClientFactory
from a2a.client.base_client import BaseClient
from a2a.client.card_resolver import parse_agent_card
from a2a.client.transports.jsonrpc import JsonRpcTransport
from a2a.compat.v0_3.jsonrpc_transport import CompatJsonRpcTransport
from a2a.compat.v0_3.types import AgentCard as V03AgentCard
from a2a.types.a2a_pb2 import (
    AgentCard,
    CancelTaskRequest,
    GetTaskRequest,
    Message,
    Part,
    Role,
    SendMessageRequest,
    StreamResponse,
    SubscribeToTaskRequest,
    Task,
    TaskState,
)
from a2a.utils.constants import AGENT_CARD_WELL_KNOWN_PATH
from a2a.utils.errors import TaskNotFoundError, UnsupportedOperationError

from tests.integration.executor.scripts import write_script
from tests.integration.gateway.harness import KEY_A, KEY_B, RunningGateway

ASK = {"tool_calls": [{"name": "ask_human", "arguments": {"question": "which colour?"}}]}


def message(text: str, *, task_id: str = "", context_id: str = "") -> Message:
    return Message(
        message_id=uuid.uuid4().hex,
        role=Role.ROLE_USER,
        parts=[Part(text=text)],
        task_id=task_id,
        context_id=context_id,
    )


def request(sent: Message, model: str | None = None) -> SendMessageRequest:
    req = SendMessageRequest(message=sent)
    if model is not None:
        req.metadata.update({"model": model})
    return req


async def client_for(gateway: RunningGateway, key: str, *, streaming: bool) -> Client:
    http = httpx.AsyncClient(headers={"Authorization": f"Bearer {key}"}, timeout=30)
    factory = ClientFactory(ClientConfig(httpx_client=http, streaming=streaming))
    return await factory.create_from_url(gateway.url)


async def responses(client: Client, req: SendMessageRequest) -> list[StreamResponse]:
    return [r async for r in client.send_message(req)]


def only_task(got: list[StreamResponse]) -> Task:
    [response] = got
    assert response.HasField("task")
    return response.task


def text(task: Task) -> str:
    return "".join(p.text for a in task.artifacts for p in a.parts)


@pytest.fixture
async def clients(keyed_stack: RunningGateway) -> AsyncIterator[tuple[Client, Client, Client]]:
    a = await client_for(keyed_stack, KEY_A, streaming=False)
    a_stream = await client_for(keyed_stack, KEY_A, streaming=True)
    b = await client_for(keyed_stack, KEY_B, streaming=False)
    yield a, a_stream, b
    for client in (a, a_stream, b):
        await client.close()


async def test_send_stream_answer_and_cancel(
    keyed_stack: RunningGateway, clients: tuple[Client, Client, Client], tmp_path: Path
) -> None:
    a, a_stream, b = clients
    async with httpx.AsyncClient(base_url=keyed_stack.url) as http:
        card = (await http.get("/.well-known/agent-card.json")).json()
    assert card["supportedInterfaces"][0]["url"] == f"{keyed_stack.url}/a2a"
    assert "default" in [s["id"] for s in card["skills"]]
    assert card["securitySchemes"]["bearer"]["httpAuthSecurityScheme"]["scheme"] == "bearer"

    # a blocking send: the answer comes back as the task's artifact
    hello = write_script(tmp_path / "hello.yaml", [{"content": "hello from longhaul"}])
    done = only_task(await responses(a, request(message("say hello"), hello)))
    assert done.status.state == TaskState.TASK_STATE_COMPLETED
    assert text(done) == "hello from longhaul"
    assert [m.parts[0].text for m in done.history] == ["say hello", "hello from longhaul"]
    async with keyed_stack.client(KEY_A) as api:  # a normal trace, in the viewer's listing
        assert (await api.get(f"/api/traces/{done.id}")).json()["status"] == "completed"

    # streamed: the task asks a question, then the next message on the task answers it
    ask = write_script(tmp_path / "ask.yaml", [ASK, {"content": "blue it is"}])
    streamed = await responses(a_stream, request(message("paint it", context_id="ctx-1"), ask))
    assert streamed[0].HasField("task")
    task_id = streamed[0].task.id
    assert streamed[0].task.context_id == "ctx-1"
    last = streamed[-1].status_update.status
    assert last.state == TaskState.TASK_STATE_INPUT_REQUIRED
    assert last.message.parts[0].text == "which colour?"
    answer = message("blue", task_id=task_id, context_id="ctx-1")
    answered = only_task(await responses(a, request(answer)))
    assert answered.id == task_id and answered.context_id == "ctx-1"
    assert answered.status.state == TaskState.TASK_STATE_COMPLETED
    assert text(answered) == "blue it is"
    # an ended task takes no more messages
    with pytest.raises(UnsupportedOperationError, match="not input-required"):
        await responses(a, request(message("again", task_id=task_id)))

    # cancel a task that waits for its answer: canceled, and GetTask agrees
    waiting = only_task(await responses(a, request(message("paint that"), ask)))
    assert waiting.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
    resubscribed = [r async for r in a_stream.subscribe(SubscribeToTaskRequest(id=waiting.id))]
    assert resubscribed[0].task.id == waiting.id
    assert resubscribed[-1].status_update.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
    canceled = await a.cancel_task(CancelTaskRequest(id=waiting.id))
    assert canceled.status.state == TaskState.TASK_STATE_CANCELED
    got = await a.get_task(GetTaskRequest(id=waiting.id))
    assert got.status.state == TaskState.TASK_STATE_CANCELED

    # the other key: every one of A's task ids is unknown to B
    for attempt in (
        b.get_task(GetTaskRequest(id=task_id)),
        b.cancel_task(CancelTaskRequest(id=waiting.id)),
        responses(b, request(message("blue", task_id=task_id))),
    ):
        with pytest.raises(TaskNotFoundError):
            await attempt


async def rpc(http: httpx.AsyncClient, method: str, params: Any, **headers: str) -> Any:
    """One JSON-RPC call; a 1.0 method name carries the version header the SDK asks for."""
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
    version = {} if "/" in method else {"A2A-Version": "1.0"}
    return await http.post("/a2a", json=body, headers={**version, **headers})


def v03_message(message_id: str, model: str, text: str = "hello", **fields: str) -> dict[str, Any]:
    """The params of a v0.3 ``message/send``: a user's text message for ``model``."""
    message = {
        "kind": "message",
        "messageId": message_id,
        "role": "user",
        "parts": [{"kind": "text", "text": text}],
        "metadata": {"model": model},
    }
    return {"message": message | fields}


async def test_v03_names_and_json_rpc_errors(keyed_stack: RunningGateway, tmp_path: Path) -> None:
    hello = write_script(tmp_path / "hello.yaml", [{"content": "hi from 0.3"}])
    auth = {"Authorization": f"Bearer {KEY_A}"}
    async with httpx.AsyncClient(base_url=keyed_stack.url, headers=auth, timeout=30) as http:
        v03 = v03_message("m-03", hello)
        sent = (await rpc(http, "message/send", v03)).json()["result"]
        assert sent["status"]["state"] == "completed"
        fetched = (await rpc(http, "tasks/get", {"id": sent["id"]})).json()["result"]
        assert fetched["artifacts"][0]["parts"][0]["text"] == "hi from 0.3"
        # the same messageId again is the same task, not a second run
        again = (await rpc(http, "message/send", v03)).json()["result"]
        assert again["id"] == sent["id"]
        ended = (await rpc(http, "tasks/cancel", {"id": sent["id"]})).json()
        assert ended["error"]["code"] == -32002  # not cancelable: it has ended
        streamed = await rpc(
            http, "message/stream", {**v03, "message": {**v03["message"], "messageId": "m-04"}}
        )
        frames = [
            json.loads(line[5:]) for line in streamed.text.splitlines() if line.startswith("data:")
        ]
        assert frames[0]["result"]["kind"] == "task"
        assert frames[-1]["result"]["status"]["state"] == "completed"

        errors = {
            "unknown method": (await rpc(http, "NoSuchMethod", {})).json(),
            "bad params": (await rpc(http, "GetTask", {"id": 5, "historyLength": "x"})).json(),
            "unknown task": (await rpc(http, "GetTask", {"id": "t_nope"})).json(),
            "empty message": (
                await rpc(
                    http,
                    "SendMessage",
                    {"message": {"messageId": "m", "role": "ROLE_USER", "parts": [{"text": ""}]}},
                )
            ).json(),
        }
        no_id = {"message": {"role": "ROLE_USER", "parts": [{"text": "x"}]}}
        errors["no messageId"] = (await rpc(http, "SendMessage", no_id)).json()
        codes = {name: body["error"]["code"] for name, body in errors.items()}
        assert codes == {
            "unknown method": -32601,
            "bad params": -32602,
            "unknown task": -32001,
            "empty message": -32602,
            "no messageId": -32602,
        }
        broken = await http.post("/a2a", content=b"{not json", headers=auth)
        assert broken.status_code == 200 and broken.json()["error"]["code"] == -32700
    async with httpx.AsyncClient(base_url=keyed_stack.url) as anonymous:
        refused = await rpc(anonymous, "GetTask", {"id": sent["id"]})
        assert refused.status_code == 401 and refused.json()["error"]["code"] == -32600
        foreign = {"Authorization": f"Bearer {KEY_B}"}
        other = await rpc(anonymous, "tasks/get", {"id": sent["id"]}, **foreign)
        assert other.json()["error"]["code"] == -32001
        # B replays A's messageId: a task of B's own, never A's
        replayed = (await rpc(anonymous, "message/send", v03, **foreign)).json()["result"]
        assert replayed["id"] != sent["id"]
        # every method B names A's task in answers as for a task that does not exist
        for method, params in (
            ("SubscribeToTask", {"id": "{task}"}),
            ("tasks/resubscribe", {"id": "{task}"}),
            ("CancelTask", {"id": "{task}"}),
            (
                "message/send",
                {"message": {**v03["message"], "messageId": "m-05", "taskId": "{task}"}},
            ),
            (
                "message/send",
                {"message": {**v03["message"], "taskId": "{task}", "contextId": "{task}"}},
            ),
        ):
            answers = []
            for task in (sent["id"], "t_01UNKNOWNUNKNOWNUNKNOWN00"):
                filled = json.loads(json.dumps(params).replace("{task}", task))
                answer = await rpc(anonymous, method, filled, **foreign)
                answers.append((answer.status_code, answer.text.replace(task, "ID")))
            assert answers[0] == answers[1] and "-32001" in answers[0][1], method


async def test_a_message_sent_again_after_its_task_was_deleted_is_not_found_not_unavailable(
    keyed_stack: RunningGateway, tmp_path: Path
) -> None:
    """A longhaul parent retries its child's message under the same deterministic id as
    long as it hears "unavailable": after a delete it must hear that the task is gone."""
    hello = write_script(tmp_path / "hello.yaml", [{"content": "hi"}] * 2)
    auth = {"Authorization": f"Bearer {KEY_A}"}
    sent_msg = v03_message("m-deleted", hello)
    async with httpx.AsyncClient(base_url=keyed_stack.url, headers=auth, timeout=30) as http:
        sent = (await rpc(http, "message/send", sent_msg)).json()["result"]
        assert sent["status"]["state"] == "completed"
        assert (await http.delete(f"/api/traces/{sent['id']}")).status_code == 200
        for _ in range(2):
            again = (await rpc(http, "message/send", sent_msg)).json()
            assert again["error"]["code"] == -32001, again  # TaskNotFoundError
            assert "deleted" in again["error"]["message"]
        assert (await http.get("/api/traces")).json()["traces"] == []


async def test_a_v03_client_discovers_the_agent_by_its_card(
    keyed_stack: RunningGateway, tmp_path: Path
) -> None:
    async with httpx.AsyncClient(base_url=keyed_stack.url) as http:
        served = (await http.get(AGENT_CARD_WELL_KNOWN_PATH)).json()
    # the schema 0.3 clients validate a card with: url, protocolVersion, a typed scheme
    legacy = V03AgentCard.model_validate(served)
    assert legacy.url == f"{keyed_stack.url}/a2a" and legacy.protocol_version == "0.3"
    assert legacy.preferred_transport == "JSONRPC"
    assert legacy.security_schemes is not None
    assert legacy.security_schemes["bearer"].root.type == "http"

    http = httpx.AsyncClient(headers={"Authorization": f"Bearer {KEY_A}"}, timeout=30)
    factory = ClientFactory(ClientConfig(httpx_client=http, streaming=False))
    card = parse_agent_card(served)
    # a client on the 0.3 interface alone speaks 0.3's JSON-RPC (message/send, tasks/get)
    only_v03 = AgentCard()
    only_v03.CopyFrom(card)
    del only_v03.supported_interfaces[:]
    only_v03.supported_interfaces.extend(
        i for i in card.supported_interfaces if i.protocol_version == "0.3"
    )
    old = factory.create(only_v03)
    current = factory.create(card)
    try:
        assert isinstance(old, BaseClient) and isinstance(current, BaseClient)
        assert isinstance(old._transport, CompatJsonRpcTransport)
        # the 1.0 client still picks 1.0 from the same card
        assert isinstance(current._transport, JsonRpcTransport)
        hello = write_script(tmp_path / "v03.yaml", [{"content": "hello, 0.3 client"}])
        done = only_task(await responses(old, request(message("say hello"), hello)))
        assert done.status.state == TaskState.TASK_STATE_COMPLETED
        assert text(done) == "hello, 0.3 client"
        fetched = await old.get_task(GetTaskRequest(id=done.id))
        assert fetched.status.state == TaskState.TASK_STATE_COMPLETED
    finally:
        await old.close()
        await current.close()


async def test_a_file_part_with_bytes_is_in_the_task_directory_before_the_model_reads(
    keyed_stack: RunningGateway, clients: tuple[Client, Client, Client], tmp_path: Path
) -> None:
    a, _, _ = clients
    reader = write_script(
        tmp_path / "reader.yaml",
        [
            {"tool_calls": [{"name": "read", "arguments": {"path": "data.csv"}}]},
            {"content": "read it"},
        ],
    )
    sent = message("read data.csv")
    sent.parts.append(Part(raw=b"a,b\n1,2\n", filename="data.csv", media_type="text/csv"))
    done = only_task(await responses(a, request(sent, reader)))
    assert done.status.state == TaskState.TASK_STATE_COMPLETED, done.status
    async with keyed_stack.client(KEY_A) as api:
        path = (await api.get(f"/api/traces/{done.id}/messages")).json()["messages"]
    [read] = [m for m in path if m["role"] == "tool"]
    assert "1,2" in str(read["content"])
    # a file part without a name is refused, and so is one by url
    unnamed = message("x")
    unnamed.parts.append(Part(raw=b"1"))
    by_url = message("y")
    by_url.parts.append(Part(url="http://127.0.0.1:1/x", filename="x"))
    for refused in (unnamed, by_url):
        with pytest.raises(Exception, match="file"):
            await responses(a, request(refused, reader))
