"""``longhaul mcp``: the gateway's MCP server (``/mcp``) on stdin/stdout, for desktop clients
that launch MCP servers as commands (Claude Desktop, Claude Code).

A relay, not a second server: one streamable-HTTP client session to the gateway (with the
API key), and a stdio server whose tools, resources and progress notifications are the
gateway's, forwarded as they are. What the tools do is defined once, on the gateway.

When the gateway refuses the session (no key, a wrong one) or cannot be reached, the relay
still serves stdin/stdout: every request, ``initialize`` first, is answered with a JSON-RPC
error that says what to fix, so the desktop client shows that instead of a dead process.
"""

from __future__ import annotations

import contextlib
from importlib.metadata import version

import httpx2
import mcp_types as types
from mcp import Client, MCPError
from mcp.client.streamable_http import streamable_http_client
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server

CONNECT_TIMEOUT_S = 30.0
READ_TIMEOUT_S = 900.0
"""A tool call that follows a run (a progress token) may stream for the gateway's
``completion_timeout_s``: reads wait longer than that."""
REFUSED = -32001
"""JSON-RPC server-error code of a refused session (the gateway's own for a refused request)."""
VERSION = version("longhaul-cli")


def _relay(upstream: Client) -> Server[object]:
    async def list_tools(
        ctx: ServerRequestContext[object], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return await upstream.list_tools()

    async def call_tool(
        ctx: ServerRequestContext[object], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        async def progress(progress: float, total: float | None, message: str | None) -> None:
            await ctx.session.report_progress(progress, total, message)

        wants = (ctx.meta or {}).get("progress_token") is not None
        return await upstream.call_tool(
            params.name, params.arguments or {}, progress_callback=progress if wants else None
        )

    async def list_resources(
        ctx: ServerRequestContext[object], params: types.PaginatedRequestParams | None
    ) -> types.ListResourcesResult:
        return await upstream.list_resources()

    async def list_templates(
        ctx: ServerRequestContext[object], params: types.PaginatedRequestParams | None
    ) -> types.ListResourceTemplatesResult:
        return await upstream.list_resource_templates()

    async def read_resource(
        ctx: ServerRequestContext[object], params: types.ReadResourceRequestParams
    ) -> types.ReadResourceResult:
        return await upstream.read_resource(str(params.uri))

    return Server(
        "longhaul",
        version=VERSION,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
        on_list_resources=list_resources,
        on_list_resource_templates=list_templates,
        on_read_resource=read_resource,
    )


def _refusing(reason: str) -> Server[object]:
    """A server that answers every request with ``reason``: ``initialize`` (a handshake-era
    client), or the first call after ``server/discover`` (which only names the protocol
    versions: refusing it would leave a modern client on a connection it cannot use)."""
    server: Server[object] = Server("longhaul", version=VERSION)

    async def refuse(ctx: ServerRequestContext[object], call_next: CallNext) -> HandlerResult:
        if ctx.request_id is None or ctx.method == "server/discover":
            return await call_next(ctx)
        raise MCPError(REFUSED, reason)

    server.middleware.append(refuse)
    return server


def _cause(exc: BaseException) -> BaseException:
    """The first error an exception group (the SDK's task groups) carries."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


def _why_not(exc: Exception, url: str) -> str | None:
    """What to fix when the session could not be opened; None for an error of ours."""
    cause = _cause(exc)
    if isinstance(cause, MCPError):
        why = f"the gateway at {url} refused the session ({cause.error.message})"
        if cause.error.message.startswith("unauthorized"):
            why += (
                ": set LONGHAUL_API_KEY (or pass --api-key) to one of the gateway's keys "
                "(gateway.api_keys / LONGHAUL_API_KEYS)"
            )
        return why
    if isinstance(cause, httpx2.HTTPError):
        return f"cannot reach the gateway at {url} ({cause!r}): is it up? set LONGHAUL_URL"
    return None


async def serve_stdio(url: str, api_key: str | None) -> None:
    """Relay ``url``'s ``/mcp`` to stdin/stdout until the client closes stdin."""
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    timeout = httpx2.Timeout(CONNECT_TIMEOUT_S, read=READ_TIMEOUT_S)
    async with (
        httpx2.AsyncClient(headers=headers, timeout=timeout) as http,
        contextlib.AsyncExitStack() as stack,
    ):
        transport = streamable_http_client(f"{url.rstrip('/')}/mcp", http_client=http)
        try:
            server = _relay(await stack.enter_async_context(Client(transport)))
        except Exception as exc:
            reason = _why_not(exc, url)
            if reason is None:
                raise
            server = _refusing(reason)
        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())
