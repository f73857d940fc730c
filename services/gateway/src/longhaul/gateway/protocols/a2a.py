"""``/a2a``: longhaul as an A2A agent (the official ``a2a-sdk``'s JSON-RPC dispatcher), so
other agent frameworks call it as a remote agent; its card is at
``/.well-known/agent-card.json``.

The SDK parses and answers the protocol (A2A 1.0 method names, and v0.3's ``message/send``,
``message/stream``, ``tasks/get``, ``tasks/cancel`` through its compatibility adapter); the
handler here maps each request onto the operations of ``/api/traces`` (``start_trace``,
``commands.append_to_trace``, ``access.owned_trace``). **A task is a trace**: the task id is
the trace id, so the mapping is as durable as the log, the viewer shows every task, and a key
reaches only its own tasks (another key's task id is ``TaskNotFoundError``, as an unknown one).

* A message without ``taskId`` starts a task. Its trace id is derived from the key and the
  ``messageId`` (``commands.keyed_trace_id``): a message sent again (a client or a longhaul
  parent retrying after a crash) finds the task the first one started; once that task is
  deleted, the same ``messageId`` is ``TaskNotFoundError`` (never "unavailable", which a
  client retries) while the delete's tombstone lasts (10 minutes), then starts a new task.
* A message with ``taskId`` answers the task's question (``input-required``): the trace gets
  ``human_replied``. A task in any other state refuses it.
* A client's ``contextId`` is recorded per key in the workspace KV (``a2a/<owner>/<trace>``,
  removed with the trace); without one the context is the task's own id.
* ``SendMessage`` waits until the run settles (answer, question, failure, stop), at most
  ``gateway.completion_timeout_s``, unless ``returnImmediately``; ``SendStreamingMessage`` and
  ``SubscribeToTask`` stream the task, one ``working`` status per step, the answer artifact and
  the final status, within the same bound.
* ``metadata`` of the request (or of the message) may name ``preset`` (a skill of the card)
  and ``model``.

Push notifications, ``ListTasks`` and the extended card are not offered (the card says so).
"""

from __future__ import annotations

import base64
import contextlib
import json
from collections.abc import AsyncGenerator, AsyncIterator, Iterator
from typing import Any

from a2a.server.context import ServerCallContext
from a2a.server.events import Event
from a2a.server.request_handlers.request_handler import RequestHandler
from a2a.server.request_handlers.response_helpers import (
    agent_card_to_dict,
    build_error_response,
)
from a2a.server.routes.common import DefaultServerCallContextBuilder
from a2a.server.routes.jsonrpc_dispatcher import JsonRpcDispatcher
from a2a.types.a2a_pb2 import (
    AgentCapabilities,
    AgentCard,
    AgentInterface,
    AgentSkill,
    CancelTaskRequest,
    DeleteTaskPushNotificationConfigRequest,
    GetExtendedAgentCardRequest,
    GetTaskPushNotificationConfigRequest,
    GetTaskRequest,
    HTTPAuthSecurityScheme,
    ListTaskPushNotificationConfigsRequest,
    ListTaskPushNotificationConfigsResponse,
    ListTasksRequest,
    ListTasksResponse,
    Message,
    SecurityRequirement,
    SecurityScheme,
    SendMessageRequest,
    StringList,
    SubscribeToTaskRequest,
    Task,
    TaskPushNotificationConfig,
)
from a2a.utils.constants import (
    AGENT_CARD_WELL_KNOWN_PATH,
    PROTOCOL_VERSION_0_3,
    PROTOCOL_VERSION_1_0,
    TransportProtocol,
)
from a2a.utils.errors import (
    ContentTypeNotSupportedError,
    ExtendedAgentCardNotConfiguredError,
    InternalError,
    InvalidParamsError,
    InvalidRequestError,
    PushNotificationNotSupportedError,
    TaskNotCancelableError,
    TaskNotFoundError,
    UnsupportedOperationError,
)
from fastapi import FastAPI, Request
from google.protobuf.json_format import MessageToDict
from longhaul.domain import events as ev
from longhaul.domain.settings import TraceSettings
from longhaul.domain.state import TraceState
from longhaul.gateway import access, commands
from longhaul.gateway.auth import Principal, bearer_scheme, current_principal
from longhaul.gateway.errors import ApiError
from longhaul.gateway.protocols.a2a_tasks import (
    artifact_update,
    progress_update,
    status_update,
    task_of,
)
from longhaul.gateway.protocols.run_outcome import (
    RunFollower,
    outcome_of,
    settles,
    viewer_link,
)
from longhaul.gateway.runtime import Runtime
from longhaul.gateway.schemas.runs import RunFile
from longhaul.gateway.schemas.traces import CreateTraceRequest, UserMessage
from longhaul.gateway.usecases.files import decoded_files, put_files
from longhaul.gateway.usecases.start import start_trace
from pydantic import ValidationError
from starlette.responses import JSONResponse, Response

PATH = "/a2a"
_PRINCIPAL = "longhaul_principal"
_BASE_URL = "longhaul_base_url"
_CONTEXT_LIMIT = 256


@contextlib.contextmanager
def _refusals() -> Iterator[None]:
    """A refusal of the gateway becomes the protocol's error (an unknown or foreign task is
    ``TaskNotFoundError``)."""
    try:
        yield
    except ApiError as exc:
        detail = f"{exc.code}: {exc.message}"
        if exc.status == 404:
            raise TaskNotFoundError(message=detail) from exc
        if exc.status in (400, 409, 413, 422):
            raise InvalidParamsError(message=detail) from exc
        if exc.status < 500:
            raise InvalidRequestError(message=detail) from exc
        raise InternalError(message=detail) from exc
    except ValidationError as exc:
        raise InvalidParamsError(message=f"invalid_request: {exc.errors()[0]['msg']}") from exc


def _caller(context: ServerCallContext) -> tuple[Principal, str]:
    principal = context.state.get(_PRINCIPAL)
    if not isinstance(principal, Principal):  # the gate always sets it
        raise InvalidRequestError(message="unauthorized: no API key on this request")
    return principal, str(context.state.get(_BASE_URL, ""))


class _CallContexts(DefaultServerCallContextBuilder):
    """The SDK's call context, with the caller the gate authenticated and the base URL."""

    def build(self, request: Request) -> ServerCallContext:
        context = super().build(request)
        context.state[_PRINCIPAL] = request.scope.get("state", {}).get(_PRINCIPAL)
        context.state[_BASE_URL] = str(request.base_url)
        return context


File = tuple[str, str, str | None]
"""(name, base64, media type) of a file part."""


def _contents(message: Message) -> tuple[str, list[File]]:
    """The message's text parts (and data parts, as JSON), one per line, and its file parts
    with bytes (``raw``, named by ``filename``): those go into the task's working directory."""
    pieces = []
    files: list[File] = []
    for part in message.parts:
        kind = part.WhichOneof("content")
        if kind == "text":
            pieces.append(part.text)
        elif kind == "data":
            pieces.append(json.dumps(MessageToDict(part.data)))
        elif kind == "raw":
            if not part.filename:
                raise InvalidParamsError(message="a file part needs a filename")
            encoded = base64.b64encode(part.raw).decode()
            files.append((part.filename, encoded, part.media_type or None))
        else:
            raise ContentTypeNotSupportedError(
                message="only text, data and file parts with bytes are taken (a file by url "
                "is not fetched)"
            )
    text = "\n".join(pieces).strip()
    if not text:
        raise InvalidParamsError(message="the message has no text")
    return text, files


def _option(params: SendMessageRequest, name: str) -> str | None:
    """``preset`` / ``model`` from the request's metadata, else the message's."""
    for metadata in (params.metadata, params.message.metadata):
        value = MessageToDict(metadata).get(name)
        if value is not None:
            if not isinstance(value, str):
                raise InvalidParamsError(message=f"metadata.{name} must be a string")
            return value
    return None


def agent_card(runtime: Runtime, base_url: str) -> AgentCard:
    """The card: one skill per preset, JSON-RPC at ``/a2a`` for A2A 1.0 and 0.3 (the
    dispatcher takes both method sets at the one URL; ``agent_card_to_dict`` adds the 0.3
    fields, ``url``, ``protocolVersion``, ``preferredTransport``, ``security``, from the 0.3
    interface), the gateway's bearer keys."""
    url = base_url.rstrip("/") + PATH
    presets = runtime.presets
    skills = [
        AgentSkill(
            id=name,
            name=name,
            description=presets.get(name).description or f"a longhaul agent in preset {name}",
            tags=["longhaul", "preset"],
        )
        for name in presets.names()
    ]
    return AgentCard(
        name="longhaul",
        description="A durable long-horizon agent: every task is a trace that survives "
        "restarts. Pick a skill with metadata.preset; answer input-required with a message "
        "on the same taskId.",
        version="0.1.0",
        supported_interfaces=[
            AgentInterface(url=url, protocol_binding=TransportProtocol.JSONRPC, protocol_version=v)
            for v in (PROTOCOL_VERSION_1_0, PROTOCOL_VERSION_0_3)
        ],
        capabilities=AgentCapabilities(streaming=True, push_notifications=False),
        security_schemes={
            "bearer": SecurityScheme(
                http_auth_security_scheme=HTTPAuthSecurityScheme(
                    scheme="bearer", description="a longhaul API key (gateway.api_keys)"
                )
            )
        },
        security_requirements=[SecurityRequirement(schemes={"bearer": StringList()})],
        default_input_modes=["text/plain", "application/json"],
        default_output_modes=["text/plain"],
        skills=skills,
    )


class LonghaulTasks(RunFollower, RequestHandler):
    """The A2A operations, each on the caller's own traces."""

    # ------------------------------------------------------------ contexts

    def _context_key(self, principal: Principal, trace_id: str) -> str:
        return f"a2a/{principal.owner}/{trace_id}"

    async def _remember_context(self, principal: Principal, trace_id: str, context: str) -> None:
        async with self.runtime.nats_call():
            await self.runtime.service.workspace.put(
                self._context_key(principal, trace_id), context.encode()
            )

    async def _context_id(self, principal: Principal, trace_id: str) -> str:
        async with self.runtime.nats_call():
            entry = await self.runtime.service.workspace.get(self._context_key(principal, trace_id))
        return trace_id if entry is None else entry.value.decode()

    # ------------------------------------------------------------ messages

    async def _start(
        self, principal: Principal, params: SendMessageRequest, text: str, files: list[File]
    ) -> tuple[str, int]:
        """Start the task a new message asks for: (its id, the sequence to follow from)."""
        message = params.message
        trace_id = commands.keyed_trace_id(principal.owner, f"a2a:{message.message_id}")
        try:
            seq = await commands.keyed_creation(self.runtime, principal, trace_id)
        except commands.KeyedTraceDeleted as exc:  # gone: no retry brings it back
            raise TaskNotFoundError(
                message=f"the task this messageId started ({trace_id}) was deleted; "
                "send the message again under a new messageId"
            ) from exc
        if seq is not None:  # the same message again: the task it started
            return trace_id, seq
        preset = _option(params, "preset")
        if preset is not None and preset not in self.runtime.presets:
            raise InvalidParamsError(message=f"no preset {preset!r} (the card's skills)")
        body = CreateTraceRequest.stating(
            TraceSettings(model=_option(params, "model"), preset=preset),
            messages=[UserMessage(role="user", content=text)],
            files=[
                RunFile(name=name, content=data, media_type=media) for name, data, media in files
            ],
        )
        state = await start_trace(self.runtime, principal, body, trace_id)
        if message.context_id:
            await self._remember_context(principal, trace_id, message.context_id)
        return trace_id, state.stream_seq

    async def _answer(
        self, principal: Principal, message: Message, text: str, files: list[File]
    ) -> int:
        """Answer the question of the task the message names (its files first)."""
        state = await access.owned_trace(self.runtime, principal, message.task_id)
        if not (state.status == "waiting" and state.wait_reason == "human"):
            raise UnsupportedOperationError(
                message=f"task {message.task_id} is not input-required (it is "
                f"{state.status}): only a question takes a message; send one without "
                "taskId to start a new task"
            )
        if files:
            await put_files(self.runtime, principal, message.task_id, decoded_files(files))
        _, recorded = await commands.append_to_trace(
            self.runtime, principal, message.task_id, lambda _: ev.HumanReplied(content=text)
        )
        return recorded.seq

    async def _accept(
        self, params: SendMessageRequest, context: ServerCallContext
    ) -> tuple[Principal, str, str, int]:
        """(caller, task id, context id, sequence to follow from) of a message."""
        principal, _ = _caller(context)
        message = params.message
        if not message.message_id:
            raise InvalidParamsError(message="the message has no messageId")
        if len(message.context_id) > _CONTEXT_LIMIT:
            raise InvalidParamsError(message=f"contextId is longer than {_CONTEXT_LIMIT}")
        text, files = _contents(message)
        if message.task_id:
            task_id = message.task_id
            context_id = await self._context_id(principal, access.checked_id("task", task_id))
            if message.context_id and message.context_id != context_id:
                raise InvalidParamsError(message="contextId is not the task's context")
            after = await self._answer(principal, message, text, files)
        else:
            task_id, after = await self._start(principal, params, text, files)
            context_id = message.context_id or task_id
        return principal, task_id, context_id, after

    async def _task(
        self, principal: Principal, state: TraceState, base: str, history: int | None = None
    ) -> Task:
        context_id = await self._context_id(principal, state.trace_id)
        return task_of(state, context_id, viewer_link(base, state.trace_id), history)

    async def on_message_send(
        self, params: SendMessageRequest, context: ServerCallContext
    ) -> Task | Message:
        with _refusals():
            principal, task_id, _, after = await self._accept(params, context)
            timeout_s = 0 if params.configuration.return_immediately else None
            state = await self.settled(principal, task_id, after, timeout_s)
            history = params.configuration.history_length
            limit = history if params.configuration.HasField("history_length") else None
            return await self._task(principal, state, _caller(context)[1], limit)

    async def on_message_send_stream(
        self, params: SendMessageRequest, context: ServerCallContext
    ) -> AsyncGenerator[Event]:
        with _refusals():
            principal, task_id, context_id, after = await self._accept(params, context)
        async for event in self._updates(principal, task_id, context_id, after, context):
            yield event

    async def on_subscribe_to_task(
        self, params: SubscribeToTaskRequest, context: ServerCallContext
    ) -> AsyncGenerator[Event]:
        with _refusals():
            principal, _ = _caller(context)
            state = await access.owned_trace(self.runtime, principal, params.id)
            context_id = await self._context_id(principal, params.id)
        if state.is_final:
            raise UnsupportedOperationError(message=f"task {params.id} has ended")
        async for event in self._updates(
            principal, params.id, context_id, state.stream_seq, context
        ):
            yield event

    async def _updates(
        self,
        principal: Principal,
        task_id: str,
        context_id: str,
        after: int,
        context: ServerCallContext,
    ) -> AsyncIterator[Event]:
        """The task, a ``working`` status per step, then the answer artifact and the final
        status (the last status is ``working`` if the run outlasts the bound)."""
        viewer = viewer_link(_caller(context)[1], task_id)
        with _refusals():
            state = await access.owned_trace(self.runtime, principal, task_id)
            yield task_of(state, context_id, viewer, 0)
            if not (outcome_of(state).settled and after >= state.stream_seq):  # else: no more
                async for update in self._steps(task_id, context_id, after):
                    yield update
                state = await access.owned_trace(self.runtime, principal, task_id)
        outcome = outcome_of(state)
        if outcome.status == "completed" and outcome.answer:
            yield artifact_update(task_id, context_id, outcome.answer)
        yield status_update(state, context_id, viewer)

    async def _steps(self, task_id: str, context_id: str, after: int) -> AsyncIterator[Event]:
        """A ``working`` status per step until the run settles or the bound passes."""
        async with contextlib.aclosing(self.steps(task_id, after)) as steps:
            async for item, line in steps:
                if not settles(item):
                    message_id = f"{task_id}-step-{item.seq}"
                    yield progress_update(task_id, context_id, line, message_id)

    # ------------------------------------------------------------ tasks

    async def on_get_task(self, params: GetTaskRequest, context: ServerCallContext) -> Task:
        with _refusals():
            principal, base = _caller(context)
            state = await access.owned_trace(self.runtime, principal, params.id)
            limit = params.history_length if params.HasField("history_length") else None
            return await self._task(principal, state, base, limit)

    async def on_cancel_task(self, params: CancelTaskRequest, context: ServerCallContext) -> Task:
        with _refusals():
            principal, base = _caller(context)
            state = await access.owned_trace(self.runtime, principal, params.id)
            if state.is_final:
                raise TaskNotCancelableError(message=f"task {params.id} has ended")
            after = state.stream_seq
            if not state.stop_requested:
                _, recorded = await commands.append_to_trace(
                    self.runtime, principal, params.id, lambda _: ev.StopRequested(reason="user")
                )
                after = recorded.seq
            state = await self.settled(principal, params.id, after)
            return await self._task(principal, state, base)

    async def on_list_tasks(
        self, params: ListTasksRequest, context: ServerCallContext
    ) -> ListTasksResponse:
        raise UnsupportedOperationError(message="ListTasks: use GET /api/traces")

    # ------------------------------------------------------------ not offered

    async def on_create_task_push_notification_config(
        self, params: TaskPushNotificationConfig, context: ServerCallContext
    ) -> TaskPushNotificationConfig:
        raise PushNotificationNotSupportedError

    async def on_get_task_push_notification_config(
        self, params: GetTaskPushNotificationConfigRequest, context: ServerCallContext
    ) -> TaskPushNotificationConfig:
        raise PushNotificationNotSupportedError

    async def on_list_task_push_notification_configs(
        self, params: ListTaskPushNotificationConfigsRequest, context: ServerCallContext
    ) -> ListTaskPushNotificationConfigsResponse:
        raise PushNotificationNotSupportedError

    async def on_delete_task_push_notification_config(
        self, params: DeleteTaskPushNotificationConfigRequest, context: ServerCallContext
    ) -> None:
        raise PushNotificationNotSupportedError

    async def on_get_extended_agent_card(
        self, params: GetExtendedAgentCardRequest, context: ServerCallContext
    ) -> AgentCard:
        raise ExtendedAgentCardNotConfiguredError


class A2ASurface:
    """The card route and the authenticated JSON-RPC endpoint."""

    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime
        self.dispatcher = JsonRpcDispatcher(
            LonghaulTasks(runtime), context_builder=_CallContexts(), enable_v0_3_compat=True
        )

    def mount(self, app: FastAPI) -> None:
        app.add_api_route(
            AGENT_CARD_WELL_KNOWN_PATH,
            self.card,
            methods=["GET"],
            tags=["a2a"],
            summary="The A2A agent card (JSON-RPC at /a2a, bearer keys, presets as skills)",
        )
        app.add_api_route(PATH, self.endpoint, methods=["POST"], include_in_schema=False)

    async def card(self, request: Request) -> dict[str, Any]:
        return agent_card_to_dict(agent_card(self.runtime, str(request.base_url)))

    async def endpoint(self, request: Request) -> Response:
        """Authenticate (and rate-limit) the request, then let the SDK dispatch it."""
        try:
            principal = await current_principal(request, await bearer_scheme(request))
        except ApiError as exc:
            refused = InvalidRequestError(message=f"{exc.code}: {exc.message}")
            body = build_error_response(None, refused)
            return JSONResponse(body, status_code=exc.status, headers=exc.headers)
        request.scope.setdefault("state", {})[_PRINCIPAL] = principal
        return await self.dispatcher.handle_requests(request)
