"""``/api/traces``: create, list, inspect, and the requests that steer a trace.

Every write folds the trace, checks the request against it and appends one event; the
executor reacts to the event. The response (202) means the request is on the log.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from functools import partial
from typing import Annotated, Any, Literal

import msgspec
from fastapi import APIRouter, Body, Header, Query, Response
from fastapi.responses import PlainTextResponse
from longhaul.agent.tools.offload import output_key
from longhaul.domain.state.collaborators import is_step_trace
from longhaul.domain.state.messages import MessageTree
from longhaul.gateway.auth import CurrentPrincipal, Principal
from longhaul.gateway.deps import CurrentRuntime, ViewedTrace
from longhaul.gateway.edited_calls import recorded_context
from longhaul.gateway.errors import ERROR_RESPONSES, ApiError
from longhaul.gateway.runtime import Runtime
from longhaul.gateway.schemas.traces import (
    MAX_MESSAGES_PAGE,
    MAX_SEQUENCE,
    Accepted,
    ApproveRequest,
    CreateTraceRequest,
    Deleted,
    MessagesResponse,
    ReflectRequest,
    ReplyRequest,
    RunRequest,
    ToolResultsRequest,
    TraceList,
    TraceStatusName,
    TraceView,
)
from longhaul.gateway.usecases import erase, steering
from longhaul.gateway.usecases.listing import query_owned
from longhaul.gateway.usecases.start import start_run
from longhaul.gateway.usecases.steering import Steered
from longhaul.gateway.views import message_view, summary_of, trace_view
from starlette.convertors import StringConvertor, register_url_convertor

router = APIRouter(prefix="/api/traces", tags=["traces"], responses=ERROR_RESPONSES)
steers = partial(router.post, status_code=202, response_model=Accepted)
"""A request that steers the trace: 202 once its event is on the log."""


def _accepted(steered: Steered) -> Accepted:
    state, event_id = steered
    return Accepted(trace_id=state.trace_id, status=state.status or "running", event_id=event_id)


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
    runtime: CurrentRuntime,
    response: Response,
    idempotency_key: IdempotencyKey = None,
) -> Accepted:
    trace_id, event_id = await start_run(runtime, principal, body, idempotency_key)
    response.headers["Location"] = f"/api/traces/{trace_id}"
    return Accepted(trace_id=trace_id, status="running", event_id=event_id)


async def _list(
    runtime: Runtime,
    principal: Principal,
    statuses: frozenset[str] | None,
    parent: str | None,
    limit: int,
    cursor: str | None,
    text: str | None = None,
    evals_too: bool = True,
) -> TraceList:
    entries, next_cursor = await query_owned(
        runtime,
        principal,
        statuses=statuses,
        parent=parent,
        cursor=cursor,
        limit=limit,
        text=text,
        evals_too=evals_too,
    )
    return TraceList(
        traces=[summary_of(e, runtime.mirror) for e in entries], next_cursor=next_cursor
    )


@router.get("", response_model=TraceList, summary="List your traces, newest first")
async def list_traces(
    runtime: CurrentRuntime,
    principal: CurrentPrincipal,
    status: Annotated[list[TraceStatusName] | None, Query()] = None,
    parent: Annotated[str | None, Query(max_length=128)] = None,
    limit: Annotated[int, Query(ge=1, le=500)] = 50,
    cursor: Annotated[str | None, Query(max_length=128)] = None,
    q: Annotated[
        str | None,
        Query(max_length=200, description="only traces whose name or id contains this text"),
    ] = None,
    evals: Annotated[
        bool, Query(description="false: leave out the runs of evals (`longhaul eval`)")
    ] = True,
) -> TraceList:
    statuses = frozenset(status) if status else None
    return await _list(runtime, principal, statuses, parent, limit, cursor, q, evals_too=evals)


@router.get("/running", response_model=TraceList, summary="Your traces that are running")
async def running_traces(
    runtime: CurrentRuntime,
    principal: CurrentPrincipal,
    limit: Annotated[int, Query(ge=1, le=500)] = 50,
    cursor: Annotated[str | None, Query(max_length=128)] = None,
) -> TraceList:
    return await _list(runtime, principal, frozenset({"running"}), None, limit, cursor)


@router.get(
    "/{trace_id}", response_model=TraceView, summary="A trace with goal tree and sub-traces"
)
async def get_trace(state: ViewedTrace, runtime: CurrentRuntime) -> TraceView:
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
        **ERROR_RESPONSES,
    },
)
async def get_output(
    trace_id: str, tool_call_id: str, state: ViewedTrace, runtime: CurrentRuntime
) -> PlainTextResponse:
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
async def get_context(state: ViewedTrace, runtime: CurrentRuntime) -> dict[str, Any]:
    body = await recorded_context(runtime, state)
    if state.context is None or body is None:
        raise ApiError(404, "not_found", f"trace {state.trace_id} has no recorded context (yet)")
    return {"hash": state.context.hash, **body}


@router.get(
    "/{trace_id}/messages",
    response_model=MessagesResponse,
    summary="Messages on the main path (head back to root) or all branches",
)
async def get_messages(
    state: ViewedTrace,
    mode: Literal["main_path", "all"] = "main_path",
    after: Annotated[
        int,
        Query(
            ge=0,
            le=MAX_SEQUENCE,
            description="only messages with a higher sequence (a client that has the "
            "earlier ones: sequences are never reused and messages never change)",
        ),
    ] = 0,
    before: Annotated[
        int | None,
        Query(
            ge=1,
            le=MAX_SEQUENCE,
            description="only messages with a lower sequence; with limit the page holds the "
            "highest of them: a client reads a long trace from its end (before= any number "
            "past the last sequence) and pages back with before= the lowest it got",
        ),
    ] = None,
    limit: Annotated[
        int | None,
        Query(
            ge=1,
            le=MAX_MESSAGES_PAGE,
            description="at most this many, the lowest sequences first (the highest with "
            "before=): a client pages on with after= the last sequence it got until a page "
            "holds fewer",
        ),
    ] = None,
) -> Response:
    chosen = _sequences(state.tree, mode, after, before, limit)
    body = {
        "mode": mode,
        "head_sequence": state.head_sequence,
        "messages": [message_view(state.messages[seq]) for seq in chosen],
    }
    return Response(msgspec.json.encode(body), media_type="application/json")


def _sequences(
    tree: MessageTree, mode: str, after: int, before: int | None, limit: int | None
) -> Sequence[int]:
    """The sequences a messages page holds, lowest first, found without a scan: the main
    path's rise from root to head (a message is always newer than its parent), and every
    sequence from 1 to the last is a message (each follows the last one)."""
    if mode == "main_path":
        path = tree.path
        low = bisect.bisect_right(path, after)
        high = len(path) if before is None else bisect.bisect_left(path, before)
        chosen: Sequence[int] = path
    else:
        low, high = after, min(tree.last_sequence, (before or MAX_SEQUENCE) - 1)
        chosen = range(1, tree.last_sequence + 1)
    if limit is not None and high - low > limit:
        low, high = (high - limit, high) if before is not None else (low, low + limit)
    return chosen[low:high] if low < high else ()


@steers("/{trace_id}/run", summary="Continue, rewind (after_sequence) or regenerate")
async def run_trace(
    trace_id: str,
    runtime: CurrentRuntime,
    principal: CurrentPrincipal,
    body: Annotated[RunRequest | None, Body()] = None,
) -> Accepted:
    """No body is a plain continue, like ``{}``."""
    return _accepted(
        await steering.continue_run(runtime, principal, trace_id, body or RunRequest())
    )


class TraceIdConvertor(StringConvertor):
    """``{trace_id}`` of the DELETE route never matches ``running`` (a GET-only route of its
    own): ``Allow`` on ``/api/traces/running`` then names what it serves."""

    regex = r"(?!running$)[^/]+"


register_url_convertor("trace_id", TraceIdConvertor())


@router.delete(
    "/{trace_id:trace_id}",
    summary="Delete a trace and its sub-traces everywhere they are stored",
)
async def delete_trace(
    trace_id: str, runtime: CurrentRuntime, principal: CurrentPrincipal
) -> Deleted:
    """A running or waiting trace is stopped first (its remote children asked to stop);
    once no executor runs any of the family, its events, snapshots, index entry, leases,
    stored outputs, uploads, images and working directory are erased. Afterwards the id is
    unknown to every route (404), a repeated delete included."""
    return Deleted.model_validate(await erase.erase_owned_trace(runtime, principal, trace_id))


@steers("/{trace_id}/stop", summary="Ask to stop")
async def stop_trace(
    trace_id: str, runtime: CurrentRuntime, principal: CurrentPrincipal
) -> Accepted:
    return _accepted(await steering.stop(runtime, principal, trace_id))


@steers("/{trace_id}/resume", summary="Continue a stopped, failed or completed trace from its head")
async def resume_trace(
    trace_id: str, runtime: CurrentRuntime, principal: CurrentPrincipal
) -> Accepted:
    return _accepted(await steering.resume(runtime, principal, trace_id))


@steers("/{trace_id}/reply", summary="Answer a trace that waits for a human")
async def reply_trace(
    trace_id: str, body: ReplyRequest, runtime: CurrentRuntime, principal: CurrentPrincipal
) -> Accepted:
    return _accepted(await steering.reply(runtime, principal, trace_id, body.content))


@steers("/{trace_id}/approve", summary="Approve or deny one tool call that waits for approval")
async def approve_call(
    trace_id: str, body: ApproveRequest, runtime: CurrentRuntime, principal: CurrentPrincipal
) -> Accepted:
    """Each pending call needs its own decision; the trace runs again after the last one.
    A call that is not pending (unknown, already decided, or the trace does not wait for
    approval) is a 409, as is ``took_effect`` for a call whose outcome is known. Edited
    ``arguments`` must fit the tool's recorded schema (422 ``invalid_arguments``)."""
    return _accepted(await steering.decide_call(runtime, principal, trace_id, body))


@steers(
    "/{trace_id}/tool_results",
    summary="Post the results of tool calls the trace handed to the client",
)
async def post_tool_results(
    trace_id: str,
    body: ToolResultsRequest,
    runtime: CurrentRuntime,
    principal: CurrentPrincipal,
) -> Accepted:
    """For a trace created with ``auto_execute_tools: false``: results for calls it waits on
    (any subset; the trace runs again once every pending call has one). A call it does not wait
    on, or one answered already, is a 409 and nothing is written."""
    return _accepted(await steering.post_tool_results(runtime, principal, trace_id, body))


@steers("/{trace_id}/reflect", summary="Ask for a reflection (optionally on a focus)")
async def reflect_trace(
    trace_id: str,
    runtime: CurrentRuntime,
    principal: CurrentPrincipal,
    body: Annotated[ReflectRequest | None, Body()] = None,
) -> Accepted:
    focus = body.focus if body else None
    return _accepted(await steering.reflect(runtime, principal, trace_id, focus))


@steers("/{trace_id}/compact", summary="Ask for the context to be compacted now")
async def compact_trace(
    trace_id: str, runtime: CurrentRuntime, principal: CurrentPrincipal
) -> Accepted:
    return _accepted(await steering.compact(runtime, principal, trace_id))
