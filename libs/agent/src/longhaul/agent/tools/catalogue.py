"""The tool catalogue: every tool an executor offers, with its schema and origin.

The gateway never imports the executor, yet ``GET /api/tools`` must list the executor's
tools — built-ins, tools from ``LONGHAUL_EXECUTOR__TOOL_MODULES``, configured ones such as
``web_search``, and each MCP server's. So each executor writes its catalogue to the shared
workspace under ``tools/catalogue/<its id>`` when it starts and whenever an MCP
server comes up or goes down; the gateway reads the catalogues of the executors whose
presence key (``executor.<id>`` in ``lh_leases``) is live, so a dead executor's stale entry is
never shown.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any, Literal

import msgspec
from longhaul.agent.tools.base import Tool
from longhaul.agent.tools.registry import ToolRegistry

Origin = Literal["builtin", "module", "mcp"]
ServerState = Literal["starting", "up", "down"]


class CatalogueTool(msgspec.Struct, kw_only=True, omit_defaults=True):
    name: str
    description: str
    input_schema: dict[str, Any]
    origin: Origin
    read_only: bool = False
    server: str | None = None
    """The MCP server a tool of origin ``mcp`` belongs to."""


class CatalogueServer(msgspec.Struct, kw_only=True, omit_defaults=True):
    name: str
    transport: Literal["stdio", "http"]
    state: ServerState
    tools: int = 0
    error: str | None = None
    restarts: int = 0


class Catalogue(msgspec.Struct, kw_only=True):
    executor: str
    tools: list[CatalogueTool]
    mcp_servers: list[CatalogueServer] = msgspec.field(default_factory=list)


def catalogue_key(executor_id: str) -> str:
    """The id made safe the way its presence key ``executor.<id>`` is (idempotent, so the
    gateway may pass the suffix of a presence key)."""
    return "tools/catalogue/" + re.sub(r"[^A-Za-z0-9_=-]", "_", executor_id)


def describe(tool: Tool, builtin: Iterable[str]) -> CatalogueTool:
    origin: Origin
    if tool.metadata.get("origin") == "mcp":
        origin = "mcp"
    elif tool.name in builtin:
        origin = "builtin"
    else:
        origin = "module"
    return CatalogueTool(
        name=tool.name,
        description=tool.description,
        input_schema=tool.input_schema,
        origin=origin,
        read_only=tool.read_only,
        server=tool.metadata.get("server"),
    )


def build_catalogue(
    executor: str,
    registry: ToolRegistry,
    builtin: Iterable[str],
    servers: Iterable[CatalogueServer] = (),
) -> Catalogue:
    names = set(builtin)
    return Catalogue(
        executor=executor,
        tools=[describe(tool, names) for tool in registry],
        mcp_servers=list(servers),
    )
