"""``/api/traces``: create, list, inspect, and the requests that steer a trace.

Every write folds the trace, checks the request against it and appends one event; the
executor reacts to the event. The response (202) means the request is on the log.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Annotated, Any, Literal

import msgspec
from fastapi import APIRouter, Body, Header, Query, Request, Response
from fastapi.responses import PlainTextResponse
from longhaul.agent.images import offload_images
from longhaul.agent.tools.offload import output_key
from longhaul.core.index import TraceIndexEntry
from longhaul.domain import events as ev
from longhaul.domain.state import TraceState
from longhaul.domain.state.collaborators import is_step_trace
from longhaul.gateway import access, commands, erasure
from longhaul.gateway.auth import CurrentPrincipal, Principal
from longhaul.gateway.edited_calls import check_edited_arguments, recorded_context
from longhaul.gateway.errors import ERROR_RESPONSES, JSON_ERROR_RESPONSES, ApiError
from longhaul.gateway.mirror import IndexMirror
from longhaul.gateway.routers.files import create_with_files
from longhaul.gateway.runtime import Runtime, runtime_of
from longhaul.gateway.schemas.traces import (
    Accepted,
    ApprovalBody,
    ApproveRequest,
    ChatMessage,
    CreateTraceRequest,
    Deleted,
    MessagesResponse,
    ModelParamsBody,
    ReflectRequest,
    ReplyRequest,
    RunRequest,
    ToolResultsRequest,
    TraceList,
    TraceStatusName,
    TraceView,
    VerificationBody,
)
from longhaul.gateway.verification import verification_problems
from longhaul.gateway.views import message_view, summary_of, trace_view
from longhaul.llm.registry import check_model_string
from starlette.convertors import StringConvertor, register_url_convertor

router = APIRouter(prefix="/api/traces", tags=["traces"], responses=ERROR_RESPONSES)

MIRROR_READY_S = 5.0


async def message_inputs(
    runtime: Runtime, principal: Principal, messages: list[ChatMessage]
) -> list[ev.InputMessage]:
    """The messages as events carry them: a long ``data:`` image URL is stored in the
    workspace and named by reference (``longhaul.agent.images``)."""
    raw = [m.model_dump(exclude_none=True) for m in messages]
    async with runtime.nats_call():
        workspace = runtime.service.workspace
        raw = await offload_images(raw, principal.owner, workspace.put)
    return [msgspec.convert(m, ev.InputMessage) for m in raw]


def _accepted(state: TraceState, event_id: int) -> Accepted:
    return Accepted(trace_id=state.trace_id, status=state.status or "running", event_id=event_id)


async def _steer(
    request: Request,
    principal: Principal,
    trace_id: str,
    build: Callable[[TraceState], ev.TraceEvent],
) -> Accepted:
    """Append the request ``build`` makes from the trace's fold (checked against it)."""
    runtime = runtime_of(request.app)
    state, recorded = await commands.append_to_trace(runtime, principal, trace_id, build)
    # read-your-writes: an answered wait leaves this gateway's inbox at once
    runtime.mirror.put(TraceIndexEntry.from_state(state))
    return _accepted(state, recorded.seq)


IdempotencyKey = Annotated[
    str | None,
    Header(
        alias="Idempotency-Key",
        pattern=r"^[!-~]{1,255}$",
        description="a repeat with the same key (per API key) starts nothing and answers "
        "what the first request answered",
    ),
]


@router.post("", status_code=202, response_model=Accepted, summary="Start a trace")
async def create_trace(
    body: CreateTraceRequest,
    principal: CurrentPrincipal,
    request: Request,
    response: Response,
    idempotency_key: IdempotencyKey = None,
) -> Accepted:
    runtime = runtime_of(request.app)
    trace_id = None
    if idempotency_key is not None:
        trace_id = commands.keyed_trace_id(principal.owner, idempotency_key)
        seq = await commands.keyed_creation(runtime, principal, trace_id)
        if seq is not None:  # a repeat: the first request's answer, nothing started
            response.headers["Location"] = f"/api/traces/{trace_id}"
            return Accepted(trace_id=trace_id, status="running", event_id=seq)
    state = await start_trace(runtime, principal, body, trace_id)
    response.headers["Location"] = f"/api/traces/{state.trace_id}"
    return _accepted(state, state.stream_seq)


async def start_trace(
    runtime: Runtime,
    principal: Principal,
    body: CreateTraceRequest,
    trace_id: str | None = None,
) -> TraceState:
    """Check and start the trace ``body`` describes: the one way every surface (this API,
    ``/v1``, ``/mcp``) starts a run."""
    event = await trace_creation(runtime, principal, body)
    files = [(f.name, f.content, f.media_type) for f in body.files]
    return await create_with_files(runtime, principal, event, files, trace_id)


async def trace_creation(
    runtime: Runtime, principal: Principal, body: CreateTraceRequest
) -> ev.TraceCreated:
    """The ``trace_created`` event a create body asks for (model and verification checked)."""
    check_model(runtime, body.model)
    for index, model in enumerate(body.model_fallback or []):
        check_model(runtime, model, field=f"model_fallback[{index}]")
    verification = _verification(runtime, body.verification)
    config = ev.TraceConfig(
        model=body.model,
        model_fallback=body.model_fallback,
        tools=body.tools,
        skills=body.skills or [],
        max_iterations=body.max_iterations,
        max_tokens=body.max_tokens,
        max_cost=body.max_cost,
        on_limit=body.on_limit,
        temperature=body.temperature,
        system_prompt=body.system_prompt,
        model_params=None if body.model_params is None else _model_params(body.model_params),
        approval=_approval(body.approval),
        auto_execute_tools=body.auto_execute_tools,
        verification=verification,
        messaging=body.messaging,
        experiences=body.experiences,
    )
    if body.preset:
        config.preset = body.preset
    messages = await message_inputs(runtime, principal, body.messages)
    return ev.TraceCreated(
        messages=messages,
        config=config,
        name=body.name or _title(messages),
        untitled=not body.name,
    )


def check_model(runtime: Runtime, model: str | None, *, field: str | None = None) -> None:
    """Refuse a model string no run could use (a script outside models.scripted_dir…);
    ``field`` names where it was (a fallback chain's entry)."""
    if model is None:
        return
    try:
        check_model_string(model, runtime.config.models)
    except ValueError as exc:
        message = f"{field}: {exc}" if field else str(exc)
        raise ApiError(422, "invalid_model", message) from None


def _verification(runtime: Runtime, body: VerificationBody | None) -> dict[str, Any] | None:
    """The trace's verification config; a check the operator did not configure is 422."""
    if body is None:
        return None
    config = body.model_dump(exclude_none=True)
    errors = verification_problems(config, runtime.config.verifier.commands)
    if errors:
        raise ApiError(422, "invalid_verification", "; ".join(errors))
    return config or None


def _approval(body: ApprovalBody | None) -> list[str] | None:
    if body is None:
        return None
    return ["*"] if body.tools == "*" else list(body.tools)


def _title(messages: list[ev.InputMessage], limit: int = 60) -> str | None:
    """A default name for listings: the first user message, on one line, shortened."""
    for message in messages:
        if message.role == "user" and isinstance(message.content, str) and message.content.strip():
            text = " ".join(message.content.split())
            return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"
    return None


async def ready_mirror(runtime: Runtime) -> IndexMirror:
    """The index mirror; right after start-up this waits (briefly) for the watch's first
    pass (503 if it takes longer)."""
    mirror = runtime.mirror
    if not mirror.ready.is_set():
        try:
            await asyncio.wait_for(mirror.ready.wait(), timeout=MIRROR_READY_S)
        except TimeoutError as exc:
            raise ApiError(503, "unavailable", "trace index is still loading") from exc
    return mirror


async def query_owned(
    runtime: Runtime,
    principal: Principal,
    *,
    limit: int,
    statuses: frozenset[str] | None = None,
    parent: str | None = None,
    cursor: str | None = None,
    text: str | None = None,
) -> tuple[list[TraceIndexEntry], str | None]:
    """The caller's traces from the index mirror, newest first, and the next page's cursor."""
    mirror = await ready_mirror(runtime)
    return mirror.query(
        owner=principal.owner,
        statuses=statuses,
        parent=parent,
        cursor=cursor,
        limit=limit,
        text=text,
    )


async def _list(
    runtime: Runtime,
    principal: Principal,
    statuses: frozenset[str] | None,
    parent: str | None,
    limit: int,
    cursor: str | None,
    text: str | None = None,
) -> TraceList:
    entries, next_cursor = await query_owned(
        runtime,
        principal,
        statuses=statuses,
        parent=parent,
        cursor=cursor,
        limit=limit,
        text=text,
    )
    return TraceList(
        traces=[summary_of(e, runtime.mirror) for e in entries], next_cursor=next_cursor
    )


@router.get("", response_model=TraceList, summary="List your traces, newest first")
async def list_traces(
    request: Request,
    principal: CurrentPrincipal,
    status: Annotated[list[TraceStatusName] | None, Query()] = None,
    parent: Annotated[str | None, Query(max_length=128)] = None,
    limit: Annotated[int, Query(ge=1, le=500)] = 50,
    cursor: Annotated[str | None, Query(max_length=128)] = None,
    q: Annotated[
        str | None,
        Query(max_length=200, description="only traces whose name or id contains this text"),
    ] = None,
) -> TraceList:
    statuses = frozenset(status) if status else None
    return await _list(runtime_of(request.app), principal, statuses, parent, limit, cursor, q)


@router.get("/running", response_model=TraceList, summary="Your traces that are running")
async def running_traces(
    request: Request,
    principal: CurrentPrincipal,
    limit: Annotated[int, Query(ge=1, le=500)] = 50,
    cursor: Annotated[str | None, Query(max_length=128)] = None,
) -> TraceList:
    return await _list(
        runtime_of(request.app), principal, frozenset({"running"}), None, limit, cursor
    )


@router.get(
    "/{trace_id}", response_model=TraceView, summary="A trace with goal tree and sub-traces"
)
async def get_trace(trace_id: str, request: Request, principal: CurrentPrincipal) -> TraceView:
    runtime = runtime_of(request.app)
    state = await access.owned_trace(runtime, principal, trace_id)
    parent = task = None
    async with runtime.nats_call():
        if state.parent_trace_id is not None:
            parent = await runtime.traces.load(state.parent_trace_id)
        elif is_step_trace(state) and state.task_id:
            task = await runtime.tasks.load(state.task_id)
    return trace_view(state, runtime.mirror, runtime.max_iterations(state), parent, task)


@router.get(
    "/{trace_id}/outputs/{tool_call_id}",
    summary="The whole output of a tool call whose result the model saw cut (head and tail)",
    response_class=PlainTextResponse,
    responses={
        200: {"content": {"text/plain": {"schema": {"type": "string"}}}},
        **JSON_ERROR_RESPONSES,
    },
)
async def get_output(
    trace_id: str, tool_call_id: str, request: Request, principal: CurrentPrincipal
) -> PlainTextResponse:
    runtime = runtime_of(request.app)
    state = await access.owned_trace(runtime, principal, trace_id)
    if not any(
        m.role == "tool" and m.tool_call_id == tool_call_id for m in state.messages.values()
    ):
        raise ApiError(404, "not_found", f"trace {trace_id} has no result of that tool call")
    async with runtime.nats_call():
        entry = await runtime.service.workspace.get(output_key(trace_id, tool_call_id))
    if entry is None:
        raise ApiError(404, "not_found", "that tool call's output was shown whole; none stored")
    return PlainTextResponse(entry.value.decode("utf-8", errors="replace"))


@router.get(
    "/{trace_id}/context",
    summary="The recorded context: system prompt, tool schemas, preset, skills, parameters",
)
async def get_context(
    trace_id: str, request: Request, principal: CurrentPrincipal
) -> dict[str, Any]:
    runtime = runtime_of(request.app)
    state = await access.owned_trace(runtime, principal, trace_id)
    body = await recorded_context(runtime, state)
    if state.context is None or body is None:
        raise ApiError(404, "not_found", f"trace {trace_id} has no recorded context (yet)")
    return {"hash": state.context.hash, **body}


@router.get(
    "/{trace_id}/messages",
    response_model=MessagesResponse,
    summary="Messages on the main path (head back to root) or all branches",
)
async def get_messages(
    trace_id: str,
    request: Request,
    principal: CurrentPrincipal,
    mode: Literal["main_path", "all"] = "main_path",
    after: Annotated[
        int,
        Query(
            ge=0,
            le=2**63 - 1,
            description="only messages with a higher sequence (a client that has the "
            "earlier ones: sequences are never reused and messages never change)",
        ),
    ] = 0,
) -> Response:
    state = await access.owned_trace(runtime_of(request.app), principal, trace_id)
    messages = state.main_path() if mode == "main_path" else state.all_messages()
    if after:
        messages = [m for m in messages if m.sequence > after]
    body = {
        "mode": mode,
        "head_sequence": state.head_sequence,
        "messages": [message_view(m) for m in messages],
    }
    return Response(msgspec.json.encode(body), media_type="application/json")


@router.post(
    "/{trace_id}/run",
    status_code=202,
    response_model=Accepted,
    summary="Continue, rewind (after_sequence) or regenerate",
)
async def run_trace(
    trace_id: str,
    request: Request,
    principal: CurrentPrincipal,
    body: Annotated[RunRequest | None, Body()] = None,
) -> Accepted:
    """No body is a plain continue, like ``{}``."""
    body = body or RunRequest()
    runtime = runtime_of(request.app)
    check_model(runtime, body.model)
    inputs = await message_inputs(runtime, principal, body.messages)
    after = body.after_sequence
    changes: dict[str, object] = {}
    if body.model is not None:
        changes["model"] = body.model
    if body.model_params is not None:
        changes["model_params"] = _model_params(body.model_params)

    def build(state: TraceState) -> ev.RunRequested:
        # the run's config is on its own event, so a replay or a later continue uses it too
        config = msgspec.structs.replace(state.config, **changes) if changes else None
        return ev.RunRequested(messages=inputs, after_sequence=after, config=config)

    return await _steer(request, principal, trace_id, build)


def _model_params(body: ModelParamsBody) -> ev.ModelParams:
    return msgspec.convert(body.model_dump(exclude_none=True), ev.ModelParams)


class TraceIdConvertor(StringConvertor):
    """``{trace_id}`` of the DELETE route never matches ``running`` (a GET-only route of its
    own): ``Allow`` on ``/api/traces/running`` then names what it serves."""

    regex = r"(?!running$)[^/]+"


register_url_convertor("trace_id", TraceIdConvertor())


@router.delete(
    "/{trace_id:trace_id}",
    response_model=Deleted,
    summary="Delete a trace and its sub-traces everywhere they are stored",
)
async def delete_trace(trace_id: str, request: Request, principal: CurrentPrincipal) -> Deleted:
    """A running or waiting trace is stopped first (its remote children asked to stop);
    once no executor runs any of the family, its events, snapshots, index entry, leases,
    stored outputs, uploads, images and working directory are erased. Afterwards the id is
    unknown to every route (404), a repeated delete included."""
    return Deleted.model_validate(
        await erasure.erase_owned_trace(runtime_of(request.app), principal, trace_id)
    )


@router.post("/{trace_id}/stop", status_code=202, response_model=Accepted, summary="Ask to stop")
async def stop_trace(trace_id: str, request: Request, principal: CurrentPrincipal) -> Accepted:
    return await _steer(request, principal, trace_id, lambda _: ev.StopRequested(reason="user"))


@router.post(
    "/{trace_id}/resume",
    status_code=202,
    response_model=Accepted,
    summary="Continue a stopped, failed or completed trace from its head",
)
async def resume_trace(trace_id: str, request: Request, principal: CurrentPrincipal) -> Accepted:
    return await _steer(request, principal, trace_id, lambda _: ev.RunRequested())


@router.post(
    "/{trace_id}/reply",
    status_code=202,
    response_model=Accepted,
    summary="Answer a trace that waits for a human",
)
async def reply_trace(
    trace_id: str, body: ReplyRequest, request: Request, principal: CurrentPrincipal
) -> Accepted:
    return await _steer(
        request,
        principal,
        trace_id,
        lambda _: ev.HumanReplied(content=body.content, by=principal.owner),
    )


@router.post(
    "/{trace_id}/approve",
    status_code=202,
    response_model=Accepted,
    summary="Approve or deny one tool call that waits for approval",
)
async def approve_call(
    trace_id: str, body: ApproveRequest, request: Request, principal: CurrentPrincipal
) -> Accepted:
    """Each pending call needs its own decision; the trace runs again after the last one.
    A call that is not pending (unknown, already decided, or the trace does not wait for
    approval) is a 409, as is ``took_effect`` for a call whose outcome is known. Edited
    ``arguments`` must fit the tool's recorded schema (422 ``invalid_arguments``)."""
    if body.arguments is not None:
        state = await access.owned_trace(runtime_of(request.app), principal, trace_id)
        await check_edited_arguments(
            runtime_of(request.app), state, body.tool_call_id, body.arguments
        )
    return await _steer(
        request,
        principal,
        trace_id,
        lambda _: ev.ToolDecided(
            tool_call_id=body.tool_call_id,
            approved=body.approved,
            reason=body.reason or "",
            took_effect=body.took_effect,
            arguments=body.arguments,
            by=principal.owner,
        ),
    )


@router.post(
    "/{trace_id}/tool_results",
    status_code=202,
    response_model=Accepted,
    summary="Post the results of tool calls the trace handed to the client",
)
async def post_tool_results(
    trace_id: str, body: ToolResultsRequest, request: Request, principal: CurrentPrincipal
) -> Accepted:
    """For a trace created with ``auto_execute_tools: false``: results for calls it waits on
    (any subset; the trace runs again once every pending call has one). A call it does not wait
    on, or one answered already, is a 409 and nothing is written."""
    results = [
        ev.ClientToolResult(tool_call_id=r.tool_call_id, content=r.content, is_error=r.is_error)
        for r in body.results
    ]
    return await _steer(
        request, principal, trace_id, lambda _: ev.ToolResultsPosted(results=results)
    )


@router.post(
    "/{trace_id}/reflect",
    status_code=202,
    response_model=Accepted,
    summary="Ask for a reflection (optionally on a focus)",
)
async def reflect_trace(
    trace_id: str,
    request: Request,
    principal: CurrentPrincipal,
    body: Annotated[ReflectRequest | None, Body()] = None,
) -> Accepted:
    focus = body.focus if body else None
    return await _steer(request, principal, trace_id, lambda _: ev.ReflectRequested(focus=focus))


@router.post(
    "/{trace_id}/compact",
    status_code=202,
    response_model=Accepted,
    summary="Ask for the context to be compacted now",
)
async def compact_trace(trace_id: str, request: Request, principal: CurrentPrincipal) -> Accepted:
    return await _steer(request, principal, trace_id, lambda _: ev.CompactRequested())
