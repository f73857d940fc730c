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
ServerState = Literal["starting", "up", "down", "idle"]


class CatalogueTool(msgspec.Struct, kw_only=True, omit_defaults=True):
    name: str
    description: str
    input_schema: dict[str, Any]
    origin: Origin
    read_only: bool = False
    effects: str = "unsafe"
    """``none``, ``idempotent`` or ``unsafe`` (``longhaul.agent.tools.base.Effects``)."""
    server: str | None = None
    """The MCP server a tool of origin ``mcp`` belongs to."""
    shared: bool = False
    """A tool of a ``shared`` MCP server: offered only by presets that name it."""


class CatalogueServer(msgspec.Struct, kw_only=True, omit_defaults=True):
    name: str
    transport: Literal["stdio", "http"]
    state: ServerState
    tools: int = 0
    error: str | None = None
    restarts: int = 0
    scope: Literal["key", "family"] | None = None
    """How a per-key server is instantiated (``None``: one shared process or session)."""
    instances: int | None = None
    """A per-key server's running instances."""


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
        effects=tool.effect,
        server=tool.metadata.get("server"),
        shared=bool(tool.metadata.get("shared")),
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
