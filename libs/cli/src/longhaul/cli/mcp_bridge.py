"""``longhaul mcp``: the gateway's MCP server (``/mcp``) on stdin/stdout, for desktop clients
that launch MCP servers as commands (Claude Desktop, Claude Code).

A relay, not a second server: one streamable-HTTP client session to the gateway (with the
API key), and a stdio server whose tools, resources and progress notifications are the
gateway's, forwarded as they are. What the tools do is defined once, on the gateway.
"""

from __future__ import annotations

import httpx2
import mcp_types as types
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server

CONNECT_TIMEOUT_S = 30.0
READ_TIMEOUT_S = 900.0
"""A tool call that follows a run (a progress token) may stream for the gateway's
``completion_timeout_s``: reads wait longer than that."""


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
        on_list_tools=list_tools,
        on_call_tool=call_tool,
        on_list_resource_templates=list_templates,
        on_read_resource=read_resource,
    )


async def serve_stdio(url: str, api_key: str | None) -> None:
    """Relay ``url``'s ``/mcp`` to stdin/stdout until the client closes stdin."""
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    timeout = httpx2.Timeout(CONNECT_TIMEOUT_S, read=READ_TIMEOUT_S)
    async with httpx2.AsyncClient(headers=headers, timeout=timeout) as http:
        transport = streamable_http_client(f"{url.rstrip('/')}/mcp", http_client=http)
        async with Client(transport) as upstream, stdio_server() as (read, write):
            server = _relay(upstream)
            await server.run(read, write, server.create_initialization_options())
