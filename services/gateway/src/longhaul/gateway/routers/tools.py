"""``GET /api/tools``: every tool the running executors offer, with its schema and origin.

The gateway does not import the executor: each executor publishes its catalogue to the
workspace (:mod:`longhaul.agent.tools.catalogue`), and this reads the catalogues of the
executors that are alive now (their ``executor.<id>`` presence keys in ``lh_leases``), merged
by tool name. An MCP tool is listed while any executor has it; ``mcp_servers`` says, per
executor, whether each server is up.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any, Literal

import msgspec
from fastapi import APIRouter
from longhaul.agent.tools.catalogue import Catalogue, catalogue_key
from longhaul.core.connection import Connection
from longhaul.core.workspace import WorkspaceStore
from longhaul.gateway.auth import CurrentPrincipal
from longhaul.gateway.deps import CurrentRuntime
from longhaul.gateway.errors import ERROR_RESPONSES
from pydantic import BaseModel, Field

router = APIRouter(prefix="/api", tags=["tools"], responses=ERROR_RESPONSES)

PRESENCE_PREFIX = "executor."
LOOKUP_TIMEOUT_S = 2.0


class ToolView(BaseModel):
    name: str
    description: str
    input_schema: dict[str, Any]
    origin: Literal["builtin", "module", "mcp"] = Field(
        description="builtin (incl. configured ones such as web_search), module "
        "(LONGHAUL_EXECUTOR__TOOL_MODULES) or mcp (tools.mcp_servers)"
    )
    read_only: bool
    effects: Literal["none", "idempotent", "unsafe"] = Field(
        default="unsafe",
        description="what a call does outside the trace: nothing; something a repeat with the "
        "same idempotency key does not do twice; or something that may happen twice",
    )
    server: str | None = Field(default=None, description="the MCP server of an mcp tool")
    shared: bool = Field(
        default=False,
        description="a tool of a shared MCP server, offered only by presets that name it",
    )


class McpServerView(BaseModel):
    executor: str
    name: str
    transport: Literal["stdio", "http"]
    state: Literal["starting", "up", "down", "idle"]
    tools: int
    error: str | None = None
    restarts: int
    scope: Literal["key", "family"] | None = Field(
        default=None,
        description="a per-key server's instances: one per key or per trace family "
        "(null: one shared process or session)",
    )
    instances: int | None = Field(default=None, description="a per-key server's running ones")


class ToolList(BaseModel):
    tools: list[ToolView]
    mcp_servers: list[McpServerView]
    executors: list[str] = Field(description="the live executors whose catalogues are merged")


async def live_executors(conn: Connection) -> list[str]:
    """The ids (as their presence keys spell them) of executors holding a presence key."""
    kv = await conn.kv(conn.names.leases)
    watcher = await kv.watch(PRESENCE_PREFIX + ">", ignore_deletes=True, meta_only=True)
    ids: list[str] = []
    try:
        while True:
            entry = await watcher.updates(timeout=LOOKUP_TIMEOUT_S)
            if entry is None:
                return sorted(ids)
            if entry.operation is None:
                ids.append(entry.key.removeprefix(PRESENCE_PREFIX))
    finally:
        with contextlib.suppress(Exception):
            await watcher.stop()


async def _catalogue(workspace: WorkspaceStore, executor_id: str) -> Catalogue | None:
    entry = await workspace.get(catalogue_key(executor_id))
    if entry is None:
        return None
    try:
        return msgspec.json.decode(entry.value, type=Catalogue)
    except msgspec.DecodeError:  # an executor of another version: skip it, list the rest
        return None


@router.get(
    "/tools",
    summary="Every tool the running executors offer (built-in, module, MCP) with its schema",
)
async def list_tools(runtime: CurrentRuntime, principal: CurrentPrincipal) -> ToolList:
    async with runtime.nats_call():
        executors = await live_executors(runtime.service.conn)
        workspace = runtime.service.workspace
        catalogues = await asyncio.gather(*(_catalogue(workspace, eid) for eid in executors))
    tools: dict[str, ToolView] = {}
    servers: list[McpServerView] = []
    for executor_id, catalogue in zip(executors, catalogues, strict=True):
        if catalogue is None:
            continue
        for tool in catalogue.tools:
            tools.setdefault(tool.name, ToolView(**msgspec.structs.asdict(tool)))
        servers.extend(
            McpServerView(executor=executor_id, **msgspec.structs.asdict(server))
            for server in catalogue.mcp_servers
        )
    return ToolList(tools=list(tools.values()), mcp_servers=servers, executors=executors)
