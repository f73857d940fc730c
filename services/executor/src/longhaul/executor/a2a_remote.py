"""Remote sub-agents over A2A (``remote_agents`` entries with ``protocol: a2a``): any agent
that speaks the protocol, a longhaul (its ``/a2a``) or not, through the official ``a2a-sdk``
client (httpx, every request bounded by the entry's ``timeout_s``).

The durable wait is the one remote longhauls use (``remote.RemoteWaits``): the spawn sends
the message with ``returnImmediately``, the task id it gets back is recorded on the parent as
``remote_subtrace_linked`` {``agent://host:port/<task id>``} before anything waits, and the
wait asks ``GetTask`` every ``poll_s`` from JetStream's redeliveries, so an executor killed
while it waits is simply replaced. The message id is derived from the spawn (parent, tool
call, child): a spawn retried after a crash between the agent's answer and the link sends the
same id, which a longhaul agent maps to the task the first attempt started (other agents may
start a second one: the protocol has no idempotency key).

States come back as the parent's ``subtrace_finished``: ``completed`` with the artifacts'
text (else the status message); ``failed`` / ``rejected`` as failed; ``canceled`` as
stopped. ``input-required`` (and ``auth-required``) end the wait too, as ``completed`` with
the agent's question and how to answer it: ``agent(task=<answer>,
continue_from=<agent id>)`` sends the answer on the same task and waits again. A
``continue_from`` of an ended task sends a new message in the task's context. An agent that
answers with a bare message (no task) finishes the child at once with that text.

What an agent answers is bounded (``max_response_bytes`` of the entry, 1 MiB by default,
:mod:`longhaul.executor.capped_http`): a larger answer is not read and fails the child with
that reason; the text kept from a task is cut (and says so) at ``SUMMARY_LIMIT`` characters.
"""

from __future__ import annotations

import json
import os
from collections.abc import Awaitable, Callable
from typing import TypeVar
from urllib.parse import quote, unquote, urlsplit

import httpx
from a2a.client import (
    A2AClientError,
    A2AClientTimeoutError,
    AgentCardResolutionError,
    Client,
    ClientConfig,
    ClientFactory,
)
from a2a.types.a2a_pb2 import (
    AgentCard,
    CancelTaskRequest,
    GetTaskRequest,
    Message,
    Part,
    Role,
    SendMessageRequest,
    Task,
    TaskState,
)
from a2a.utils.errors import A2AError, TaskNotCancelableError, TaskNotFoundError
from google.protobuf.json_format import MessageToDict
from longhaul.domain.config import RemoteAgentConfig
from longhaul.domain.state import SubtraceInfo, TraceState
from longhaul.executor.capped_http import IDENTITY, AnswerRefused, CappedTransport
from longhaul.executor.remote_status import (
    RemoteError,
    RemoteStatus,
    clip,
    remote_id,
    remote_trace_id,
)

T = TypeVar("T")

_RUNNING = {
    TaskState.TASK_STATE_UNSPECIFIED,
    TaskState.TASK_STATE_SUBMITTED,
    TaskState.TASK_STATE_WORKING,
}
_ASKS = {TaskState.TASK_STATE_INPUT_REQUIRED, TaskState.TASK_STATE_AUTH_REQUIRED}
_ENDED = {
    TaskState.TASK_STATE_COMPLETED: "completed",
    TaskState.TASK_STATE_FAILED: "failed",
    TaskState.TASK_STATE_REJECTED: "failed",
    TaskState.TASK_STATE_CANCELED: "stopped",
}


def parts_text(parts: list[Part]) -> str:
    """Text parts as they are, data parts as JSON, files by name."""
    pieces = []
    for part in parts:
        kind = part.WhichOneof("content")
        if kind == "text":
            pieces.append(part.text)
        elif kind == "data":
            pieces.append(json.dumps(MessageToDict(part.data)))
        elif kind is not None:
            pieces.append(f"[file {part.filename or part.url or 'unnamed'}]")
    return "\n".join(pieces)


def task_text(task: Task) -> str:
    """What the task says: its artifacts, else its status message."""
    text = "\n\n".join(parts_text(list(a.parts)) for a in task.artifacts).strip()
    return text or parts_text(list(task.status.message.parts)).strip()


def task_status(task: Task, linked: str) -> RemoteStatus:
    """The task's state as a sub-trace status (``running`` while it works)."""
    state = task.status.state
    text = task_text(task)
    if state in _RUNNING:
        return RemoteStatus("running", "", 0, 0.0)
    if state in _ASKS:
        asks = "authorisation" if state == TaskState.TASK_STATE_AUTH_REQUIRED else "input"
        summary = (
            f"The A2A agent needs {asks}: {text or '(no question given)'}\n"
            f"Answer it with agent(task=<your answer>, continue_from={linked!r})."
        )
        return RemoteStatus("completed", clip(summary), 0, 0.0)
    status = _ENDED.get(state, "failed")
    if status != "completed":
        text = f"{status}: {text or TaskState.Name(state)}"
    return RemoteStatus(status, clip(text), 0, 0.0)


def _refusal(where: str, exc: A2AError | httpx.HTTPError) -> RemoteError:
    """The SDK's (or httpx's) exception as a :class:`RemoteError`."""
    cause = exc.__cause__ if isinstance(exc, A2AError) else exc
    status = getattr(exc, "status_code", None)
    if isinstance(cause, httpx.HTTPStatusError):
        status = cause.response.status_code
    if status in (401, 403):
        return RemoteError(f"{where} refused our API key ({status})")
    if status in (429, 502, 503, 504):
        return RemoteError(f"{where} is busy ({status})", transient=True)
    if isinstance(exc, A2AClientTimeoutError | httpx.TimeoutException):
        return RemoteError(f"{where} timed out", transient=True)
    if isinstance(cause, httpx.RequestError) or (
        isinstance(exc, AgentCardResolutionError) and status is None
    ):
        return RemoteError(f"{where} is unreachable", transient=True)
    if isinstance(exc, TaskNotFoundError):
        return RemoteError(f"{where} has no such task")
    message = exc.message if isinstance(exc, A2AError) else str(exc)
    return RemoteError(f"{where} answered: {message[:500]}")


def _origin(url: str) -> tuple[str, str, int | None]:
    parts = urlsplit(url)
    default = {"http": 80, "https": 443}.get(parts.scheme)
    return parts.scheme, (parts.hostname or "").lower(), parts.port or default


def same_origin(base: str) -> Callable[[AgentCard], None]:
    """A check of the card read from ``base``: every interface it names is at ``base``'s
    origin. The operator chose that origin; a card naming another (an internal address,
    another host) would have this executor send tasks, with the agent's key, wherever the
    agent's owner says."""
    origin = _origin(base)

    def check(card: AgentCard) -> None:
        for interface in card.supported_interfaces:
            if _origin(interface.url) != origin:
                raise A2AClientError(
                    f"its card names {interface.url[:200]!r}, which is not at {base} "
                    "where the card is (remote_agents url): not followed"
                )

    return check


class A2AAgents:
    """The configured A2A agents: one SDK client each, made from the agent's card on first
    use (a card that cannot be read is asked for again on the next call)."""

    def __init__(self, configs: dict[str, RemoteAgentConfig]) -> None:
        self.configs = configs
        self._clients: dict[str, tuple[Client, httpx.AsyncClient]] = {}

    async def aclose(self) -> None:
        for client, http in self._clients.values():
            await client.close()
            await http.aclose()

    async def _client(self, name: str) -> Client:
        if name not in self._clients:
            config = self.configs[name]
            key = os.environ.get(config.api_key_env) if config.api_key_env else None
            headers = {"Authorization": f"Bearer {key}"} if key else {}
            http = httpx.AsyncClient(
                headers={**headers, **IDENTITY},
                timeout=config.timeout_s,
                transport=CappedTransport(config.max_response_bytes),
            )
            factory = ClientFactory(ClientConfig(httpx_client=http, streaming=False, polling=True))
            try:
                client = await factory.create_from_url(
                    config.url, signature_verifier=same_origin(config.url)
                )
            except BaseException:
                await http.aclose()
                raise
            self._clients[name] = (client, http)
        return self._clients[name][0]

    async def _ask(self, name: str, call: Callable[[Client], Awaitable[T]]) -> T:
        where = f"A2A agent {name!r} ({self.configs[name].url})"
        try:
            return await call(await self._client(name))
        except AnswerRefused as exc:  # final: asked again, it would answer the same
            limit = f"remote_agents.{name}.max_response_bytes"
            raise RemoteError(f"{where} {exc} ({limit}): not read") from exc
        except (A2AError, httpx.HTTPError) as exc:
            raise _refusal(where, exc) from exc

    async def _send(self, name: str, message: Message) -> Task | Message:
        async def send(client: Client) -> Task | Message:
            async for response in client.send_message(SendMessageRequest(message=message)):
                return response.task if response.HasField("task") else response.message
            raise A2AClientError("the agent answered nothing")

        return await self._ask(name, send)

    async def start(self, parent: TraceState, info: SubtraceInfo, name: str) -> str | RemoteStatus:
        """Send the task (or, continuing, the answer / the next message in the task's
        context); returns the ``agent://`` id of the task to wait on, or the status of an
        agent that answered with a bare message."""
        message = Message(
            message_id=f"longhaul-{parent.trace_id}-{info.tool_call_id}-{info.child_trace_id}",
            role=Role.ROLE_USER,
            parts=[Part(text=info.task)],
        )
        if info.preset != "default":
            message.metadata.update({"preset": info.preset})
        if info.remote_id is not None:
            task_id = unquote(remote_trace_id(info.remote_id))
            previous = await self._ask(name, lambda c: c.get_task(GetTaskRequest(id=task_id)))
            message.context_id = previous.context_id
            if previous.status.state in _ASKS:
                message.task_id = previous.id
        answer = await self._send(name, message)
        if isinstance(answer, Message):
            return RemoteStatus("completed", clip(parts_text(list(answer.parts))), 0, 0)
        return remote_id(self.configs[name], quote(answer.id, safe=""))

    async def status(self, name: str, linked: str) -> RemoteStatus:
        task_id = unquote(remote_trace_id(linked))
        task = await self._ask(
            name, lambda c: c.get_task(GetTaskRequest(id=task_id, history_length=0))
        )
        return task_status(task, linked)

    async def stop(self, name: str, linked: str) -> None:
        task_id = unquote(remote_trace_id(linked))
        try:
            await self._ask(name, lambda c: c.cancel_task(CancelTaskRequest(id=task_id)))
        except RemoteError as exc:
            if not isinstance(exc.__cause__, TaskNotCancelableError):  # ended: nothing to do
                raise
