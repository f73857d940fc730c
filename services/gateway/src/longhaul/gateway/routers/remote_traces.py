"""Remote children read through the local gateway: ``/api/traces/agent://host:port/<id>``.

A sub-agent delegated to another longhaul (``remote_agents``) lives on that longhaul's log;
its parent shows it as ``agent://host:port/<id>``. These routes let the parent's owner read
it here — the view, its messages and its event stream — by asking the remote with the
configured credentials (``remote_agents.<name>.api_key_env``, read from this gateway's
environment). The netloc in the path is only looked up, never contacted: the request goes to
the configured URL of the remote the parent's log names. The local parent is found through the
index (``remote_children``) and its fold must hold the link; a caller that does not own it
gets the 404 an unknown id gets, naming only what it asked for.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from typing import Annotated, Any, Literal

import httpx
from fastapi import APIRouter, Query
from fastapi.responses import JSONResponse, StreamingResponse
from longhaul.domain.config import RemoteAgentConfig
from longhaul.gateway import access
from longhaul.gateway.auth import CurrentPrincipal, Principal
from longhaul.gateway.deps import CurrentRuntime
from longhaul.gateway.errors import ERROR_RESPONSES, ApiError, not_found
from longhaul.gateway.runtime import Runtime
from longhaul.gateway.schemas.traces import MAX_MESSAGES_PAGE, MAX_SEQUENCE
from longhaul.gateway.sse import SSE_HEADERS, SSE_ROUTE, FlushMs, StreamFrom
from longhaul.gateway.streams import ClosingStreamingResponse

router = APIRouter(tags=["traces"], responses=ERROR_RESPONSES)

PATH = "/api/traces/agent://{netloc}/{remote_trace_id}"
STREAM_READ_S = 60.0
"""Between two chunks of a relayed event stream: the remote sends a heartbeat every 15 s."""


@dataclass(frozen=True)
class RemoteChild:
    agent_id: str
    parent_id: str
    remote: str
    """The configured name of the remote longhaul."""
    config: RemoteAgentConfig
    trace_id: str
    """Its id on the remote."""

    def client(self, *, read_s: float | None = None) -> httpx.AsyncClient:
        key = os.environ.get(self.config.api_key_env) if self.config.api_key_env else None
        return httpx.AsyncClient(
            base_url=self.config.url.rstrip("/"),
            headers={"Authorization": f"Bearer {key}"} if key else {},
            timeout=httpx.Timeout(self.config.timeout_s, read=read_s or self.config.timeout_s),
        )

    def refused(self, status: int) -> ApiError:
        """The remote's refusal as this gateway's: its 404 is ours, anything else is the
        remote's trouble (502), never the caller's."""
        if status == 404:
            return not_found("trace", self.agent_id)
        if status in (401, 403):
            message = f"remote agent {self.remote!r} refused this gateway's key ({status})"
            return ApiError(502, "remote_refused", message)
        return ApiError(502, "remote_error", f"remote agent {self.remote!r} answered {status}")

    def unreachable(self, exc: httpx.HTTPError) -> ApiError:
        if isinstance(exc, httpx.TimeoutException):
            return ApiError(504, "remote_timeout", f"remote agent {self.remote!r} timed out")
        return ApiError(502, "remote_unavailable", f"remote agent {self.remote!r} is unreachable")


async def linked_child(
    runtime: Runtime, principal: Principal, netloc: str, remote_trace_id: str
) -> RemoteChild:
    agent_id = f"agent://{netloc}/{remote_trace_id}"
    parent_id = runtime.mirror.remote_parent(agent_id)
    if parent_id is None:
        raise not_found("trace", agent_id)
    try:
        parent = await access.owned_trace(runtime, principal, parent_id)
    except ApiError as exc:
        if exc.status == 404:  # never name the parent to a key that does not own it
            raise not_found("trace", agent_id) from None
        raise
    info = next((i for i in parent.subtraces.values() if i.remote_id == agent_id), None)
    if info is None or info.remote is None:
        raise not_found("trace", agent_id)
    config = runtime.config.remote_agents.get(info.remote)
    if config is None:
        message = f"remote agent {info.remote!r} is not configured on this gateway"
        raise ApiError(502, "remote_not_configured", message)
    return RemoteChild(agent_id, parent_id, info.remote, config, remote_trace_id)


async def fetch_json(child: RemoteChild, path: str, params: Mapping[str, str | int]) -> Any:
    async with child.client() as client:
        try:
            response = await client.get(path, params=params)
        except httpx.HTTPError as exc:
            raise child.unreachable(exc) from exc
    if response.status_code != 200:
        raise child.refused(response.status_code)
    try:
        return response.json()
    except ValueError as exc:
        raise ApiError(502, "remote_error", f"remote agent {child.remote!r} sent no JSON") from exc


@router.get(PATH, summary="A remote child of one of your traces, read from its longhaul")
async def get_remote_trace(
    netloc: str, remote_trace_id: str, runtime: CurrentRuntime, principal: CurrentPrincipal
) -> JSONResponse:
    child = await linked_child(runtime, principal, netloc, remote_trace_id)
    view = await fetch_json(child, f"/api/traces/{child.trace_id}", {})
    if not isinstance(view, dict):
        raise ApiError(502, "remote_error", f"remote agent {child.remote!r} sent no trace")
    # as its parent names it here; its own sub-traces keep the remote's ids
    view.update(trace_id=child.agent_id, parent_trace_id=child.parent_id, remote=child.remote)
    return JSONResponse(view)


@router.get(PATH + "/messages", summary="The messages of a remote child of one of your traces")
async def get_remote_messages(
    netloc: str,
    remote_trace_id: str,
    runtime: CurrentRuntime,
    principal: CurrentPrincipal,
    mode: Literal["main_path", "all"] = "main_path",
    after: Annotated[int, Query(ge=0, le=MAX_SEQUENCE)] = 0,
    before: Annotated[int | None, Query(ge=1, le=MAX_SEQUENCE)] = None,
    limit: Annotated[int | None, Query(ge=1, le=MAX_MESSAGES_PAGE)] = None,
) -> JSONResponse:
    """As ``GET /api/traces/{id}/messages``: an older remote ignores before and limit and
    answers every message."""
    child = await linked_child(runtime, principal, netloc, remote_trace_id)
    params: dict[str, str | int] = {"mode": mode, "after": after}
    params |= {k: v for k, v in (("before", before), ("limit", limit)) if v is not None}
    return JSONResponse(await fetch_json(child, f"/api/traces/{child.trace_id}/messages", params))


@router.get(
    PATH + "/events",
    summary="The event stream of a remote child of one of your traces, relayed",
    **SSE_ROUTE,
)
async def get_remote_events(
    netloc: str,
    remote_trace_id: str,
    runtime: CurrentRuntime,
    principal: CurrentPrincipal,
    start: StreamFrom,
    flush_ms: FlushMs = 0,
) -> StreamingResponse:
    """The remote's SSE as it sends it (ids are the remote's stream sequences, so a client
    resumes with ``Last-Event-ID`` here exactly as it would there)."""
    child = await linked_child(runtime, principal, netloc, remote_trace_id)
    client = child.client(read_s=STREAM_READ_S)
    params: dict[str, str | int] = {
        "after": start.after,
        "follow": str(start.follow).lower(),
        "flush_ms": flush_ms,
    }
    outgoing = client.build_request("GET", f"/api/traces/{child.trace_id}/events", params=params)
    try:
        response = await client.send(outgoing, stream=True)
    except httpx.HTTPError as exc:
        await client.aclose()
        raise child.unreachable(exc) from exc
    if response.status_code != 200:
        await response.aclose()
        await client.aclose()
        raise child.refused(response.status_code)

    return ClosingStreamingResponse(
        relay(response, client, runtime.draining),
        media_type="text/event-stream",
        headers=SSE_HEADERS,
    )


async def relay(
    response: httpx.Response, client: httpx.AsyncClient, draining: asyncio.Event
) -> AsyncIterator[bytes]:
    """The remote's bytes until it ends the stream, drops it (the client reconnects with
    its ``Last-Event-ID``) or this gateway drains for shutdown, as its own streams do."""
    chunks = response.aiter_raw()
    stopping = asyncio.ensure_future(draining.wait())
    step: asyncio.Future[bytes] | None = None
    try:
        while True:
            step = asyncio.ensure_future(anext(chunks))
            await asyncio.wait({step, stopping}, return_when=asyncio.FIRST_COMPLETED)
            if not step.done():
                return
            try:
                chunk = step.result()
            except (StopAsyncIteration, httpx.HTTPError):
                return
            yield chunk
    finally:
        for pending in (step, stopping):  # the client left, or the gateway drains
            if pending is not None:
                pending.cancel()
        await response.aclose()
        await client.aclose()
