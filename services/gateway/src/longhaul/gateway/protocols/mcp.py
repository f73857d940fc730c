"""``/mcp``: longhaul as an MCP server (the official ``mcp`` SDK, streamable HTTP), so MCP
clients (Claude Desktop and Code, Cursor, VS Code) can hand it long jobs.

The tools map onto the same operations as ``/api/traces`` (``start_trace``,
``commands.append_to_trace``, ``query_owned``, ``access.owned_trace``); every run is a normal
durable trace in the viewer. The gate in front of the SDK authenticates each HTTP request with
the gateway's bearer keys (and its rate limit) and hands the caller on in the request scope, so
a key sees and steers only its own runs. The SDK runs stateless: any gateway replica answers
any request, and nothing but the log remembers a client.

A tool call that carries a progress token (the client asks for progress) follows the run: one
``notifications/progress`` per step until it settles (answer, question, failure) or
``gateway.completion_timeout_s`` passes, and returns where it stands then.
"""

from __future__ import annotations

import base64
import contextlib
import inspect
from collections.abc import Callable, Iterator
from importlib.metadata import version
from typing import Any, Literal, TypeVar

from fastapi import FastAPI
from longhaul.domain import events as ev
from longhaul.domain.settings import TraceSettings
from longhaul.gateway import access, commands
from longhaul.gateway.auth import Principal, bearer_scheme, current_principal
from longhaul.gateway.errors import ApiError
from longhaul.gateway.protocols.run_outcome import (
    RunFollower,
    outcome_of,
    text_of,
    viewer_link,
)
from longhaul.gateway.runtime import Runtime
from longhaul.gateway.schemas.runs import RunFile
from longhaul.gateway.schemas.traces import CreateTraceRequest, UserMessage
from longhaul.gateway.usecases.files import checked_name
from longhaul.gateway.usecases.listing import query_owned
from longhaul.gateway.usecases.start import start_trace
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ResourceError, ResourceNotFoundError, ToolError
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from pydantic import ValidationError
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.types import Receive, Scope, Send

PATH = "/mcp"
TRANSCRIPT = "longhaul://runs/{trace_id}/transcript"
_PRINCIPAL = "longhaul_principal"
_UNAUTHORISED = -32001
"""JSON-RPC server-error code of a refused HTTP request (the SDK's own codes are -32000…)."""

StatusName = Literal["running", "waiting", "completed", "failed", "stopped"]
_Fn = TypeVar("_Fn", bound=Callable[..., Any])


@contextlib.contextmanager
def _refusals() -> Iterator[None]:
    """A refusal of the gateway (404, 409, 422…) becomes the tool's error result."""
    try:
        yield
    except ApiError as exc:
        raise ToolError(f"{exc.code}: {exc.message}") from exc
    except ValidationError as exc:
        raise ToolError(f"invalid_request: {exc.errors()[0]['msg']}") from exc


def _request(ctx: Context) -> Request:
    request = ctx.request_context.request
    if not isinstance(request, Request):
        raise ToolError("this server is served over HTTP only")
    return request


def _principal(ctx: Context) -> Principal:
    principal = _request(ctx).scope.get("state", {}).get(_PRINCIPAL)
    if not isinstance(principal, Principal):
        raise ToolError("unauthorized: no API key on this request")
    return principal


def _base64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def _link(ctx: Context, trace_id: str) -> str:
    return viewer_link(str(_request(ctx).base_url), trace_id)


def _wants_progress(ctx: Context) -> bool:
    meta = ctx.request_context.meta or {}
    return meta.get("progress_token") is not None


def _bearer_challenge(message: str) -> str:
    """RFC 6750's challenge, saying how to send a key; without ``resource_metadata``, so
    MCP clients ask for the key instead of starting OAuth discovery."""
    description = f"{message}; send Authorization: Bearer <a longhaul API key>"
    return (
        'Bearer realm="longhaul", error="invalid_token", '
        f'error_description="{description.replace(chr(34), chr(39))}"'
    )


class McpSurface(RunFollower):
    """The MCP server, its session manager (run by the gateway's lifespan) and the gate."""

    def __init__(self, runtime: Runtime) -> None:
        super().__init__(runtime)
        self.server: MCPServer[Any] = MCPServer(
            "longhaul",
            instructions="Hand longhaul a long job with start_run; it runs durably (the "
            "gateway or your client may restart). get_run reports the answer or the question "
            "it asks; reply answers the question.",
            version=version("longhaul-gateway"),
        )
        # no prompts are served: not advertised, and prompts/* is "method not found"
        for method in ("prompts/list", "prompts/get"):
            self.server._lowlevel_server._request_handlers.pop(method, None)
        self._register()
        self.server.streamable_http_app(
            stateless_http=True,
            # the gate applies the gateway's own Host/Origin rules (auth.py)
            transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
        )
        self.manager: StreamableHTTPSessionManager = self.server.session_manager

    def mount(self, app: FastAPI) -> None:
        # an instance (not a function) is served as an ASGI app: the SDK streams its answer
        app.add_route(
            PATH,
            self,  # type: ignore[arg-type]
            methods=["GET", "POST", "DELETE"],
            include_in_schema=False,
        )

    def running(self) -> contextlib.AbstractAsyncContextManager[None]:
        return self.manager.run()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Authenticate (and rate-limit) every HTTP request before the SDK sees it."""
        request = Request(scope, receive)
        try:
            principal = await current_principal(request, await bearer_scheme(request))
        except ApiError as exc:
            body = {
                "jsonrpc": "2.0",
                "id": None,
                "error": {"code": _UNAUTHORISED, "message": f"{exc.code}: {exc.message}"},
            }
            headers = dict(exc.headers or {})
            if exc.status == 401:  # a key to send, not an OAuth flow (none is offered)
                headers["WWW-Authenticate"] = _bearer_challenge(exc.message)
            await JSONResponse(body, status_code=exc.status, headers=headers)(scope, receive, send)
            return
        scope.setdefault("state", {})[_PRINCIPAL] = principal
        await self.manager.handle_request(scope, receive, send)

    async def _follow(self, ctx: Context, trace_id: str, after: int) -> None:
        """Report each step of the run until it settles or the wait's bound passes."""
        async with contextlib.aclosing(self.steps(trace_id, after)) as steps:
            count = 0
            async for _, line in steps:
                count += 1
                await ctx.report_progress(count, None, line)

    async def _standing(self, ctx: Context, trace_id: str) -> dict[str, Any]:
        return await self.standing(_principal(ctx), trace_id, str(_request(ctx).base_url))

    def _register(self) -> None:
        """One closure per tool (the SDK reads their signatures; the description is the
        docstring without its source indentation)."""
        server, runtime = self.server, self.runtime

        def tool(fn: _Fn) -> _Fn:
            return server.tool(description=inspect.cleandoc(fn.__doc__ or ""))(fn)

        @tool
        async def start_run(
            prompt: str,
            ctx: Context,
            preset: str | None = None,
            model: str | None = None,
            files: dict[str, str] | None = None,
        ) -> dict[str, Any]:
            """Start a run of a longhaul agent on `prompt`. `preset`: an agent preset
            (default: default); `model`: a longhaul model string; `files`: name → text, put in
            the run's working directory. Returns the trace id and a viewer link; with a
            progress token, reports progress and returns once the run settles."""
            with _refusals():
                principal = _principal(ctx)
                if preset is not None and preset not in runtime.presets:
                    raise ApiError(422, "invalid_request", f"no preset {preset!r}")
                # in the working directory before the run's first model call
                given = [
                    RunFile(name=checked_name(name), content=_base64(text), media_type="text/plain")
                    for name, text in (files or {}).items()
                ]
                body = CreateTraceRequest.stating(
                    TraceSettings(model=model, preset=preset),
                    messages=[UserMessage(role="user", content=prompt)],
                    files=given,
                )
                state = await start_trace(runtime, principal, body)
                if _wants_progress(ctx):
                    await self._follow(ctx, state.trace_id, state.stream_seq)
                    return await self._standing(ctx, state.trace_id)
                return {
                    "trace_id": state.trace_id,
                    "status": state.status,
                    "viewer": _link(ctx, state.trace_id),
                }

        @tool
        async def get_run(trace_id: str, ctx: Context) -> dict[str, Any]:
            """Where a run stands: status, answer, the question it asks while it waits for
            you, the error, token and cost totals, and a viewer link. With a progress token,
            follows the run until it settles first."""
            with _refusals():
                if _wants_progress(ctx):
                    state = await access.owned_trace(runtime, _principal(ctx), trace_id)
                    if not outcome_of(state).settled:  # else nothing more is coming
                        await self._follow(ctx, trace_id, state.stream_seq)
                return await self._standing(ctx, trace_id)

        @tool
        async def reply(trace_id: str, text: str, ctx: Context) -> dict[str, Any]:
            """Answer the question of a run that waits for you (ask_human). With a progress
            token, follows the run until it settles again."""
            with _refusals():
                _, recorded = await commands.append_to_trace(
                    runtime, _principal(ctx), trace_id, lambda _: ev.HumanReplied(content=text)
                )
                if _wants_progress(ctx):
                    await self._follow(ctx, trace_id, recorded.seq)
                return await self._standing(ctx, trace_id)

        @tool
        async def stop_run(trace_id: str, ctx: Context) -> dict[str, Any]:
            """Ask a running or waiting run to stop. With a progress token, returns once it
            has stopped."""
            with _refusals():
                _, recorded = await commands.append_to_trace(
                    runtime, _principal(ctx), trace_id, lambda _: ev.StopRequested(reason="user")
                )
                if _wants_progress(ctx):
                    await self._follow(ctx, trace_id, recorded.seq)
                return await self._standing(ctx, trace_id)

        @tool
        async def list_runs(
            ctx: Context, status: StatusName | None = None, limit: int = 50
        ) -> list[dict[str, Any]]:
            """Your runs, newest first (optionally only those with `status`)."""
            with _refusals():
                entries, _ = await query_owned(
                    runtime,
                    _principal(ctx),
                    limit=max(1, min(limit, 500)),
                    statuses=frozenset({status}) if status else None,
                )
                return [
                    {
                        "trace_id": e.trace_id,
                        "name": e.name,
                        "status": e.status,
                        "wait_reason": e.wait_reason,
                        "updated_at": e.updated_at,
                        "viewer": _link(ctx, e.trace_id),
                    }
                    for e in entries
                ]

        @server.resource(TRANSCRIPT, mime_type="text/markdown")
        async def transcript(trace_id: str, ctx: Context) -> str:
            """A run's conversation on its main path, one section per message."""
            try:
                state = await access.owned_trace(runtime, _principal(ctx), trace_id)
            except ApiError as exc:  # a JSON-RPC error: -32602 for an unknown run
                kind = ResourceNotFoundError if exc.status == 404 else ResourceError
                raise kind(f"{exc.code}: {exc.message}") from exc
            sections = [f"# {state.name or trace_id} ({state.status})"]
            for message in state.main_path():
                text = text_of(message.content)
                calls = ", ".join(c.function.name for c in message.tool_calls or [])
                heading = f"## {message.role}" + (f" → {calls}" if calls else "")
                sections.append(f"{heading}\n\n{text}".rstrip())
            return "\n\n".join(sections) + "\n"
