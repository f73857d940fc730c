"""MCP servers' tools, offered to the model as ``<server>__<tool>``.

The operator lists servers under ``tools.mcp_servers`` (a ``command`` spoken to over stdio,
or a streamable-HTTP ``url``). A ``shared`` server is one session per executor for every key
(:class:`~longhaul.agent.tools.mcp.McpServer`, started at once and kept running); any other is
per key (:class:`~longhaul.agent.tools.mcp_keys.KeyedMcpServer`, an instance per key started on
first use, in the sandbox, in the key's directory). Each listed tool becomes a :class:`McpTool`
in the executor's registry with the server's own input schema, so schema validation, loop
detection, presets' allow/deny lists and approval apply to it like to any built-in; a shared
server's tools carry ``shared`` in their metadata, and presets offer them only when they name
them (:meth:`longhaul.agent.presets.Preset.select_tools`).
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import mcp_types
from longhaul.agent.tools.base import Effects, Tool
from longhaul.agent.tools.catalogue import CatalogueServer
from longhaul.agent.tools.context import ToolContext
from longhaul.agent.tools.mcp import McpServer, exposed_name
from longhaul.agent.tools.mcp_keys import KeyedMcpServer
from longhaul.agent.tools.registry import ToolRegistry
from longhaul.agent.tools.result import ToolReply, ToolResult
from longhaul.agent.tools.schema import ArgsModel
from longhaul.domain.config import McpServerConfig, SandboxConfig
from longhaul.llm.untrusted_schema import UntrustedSchemaError, untrusted_validator
from pydantic import ConfigDict

log = logging.getLogger(__name__)


class Endpoint(Protocol):
    """What a tool needs of its server: a shared session or a per-key pool."""

    name: str
    config: McpServerConfig
    tools: list[mcp_types.Tool]

    async def call(self, ctx: ToolContext, tool: str, arguments: dict[str, Any]) -> ToolResult: ...


class _AnyArguments(ArgsModel):
    """MCP tools are validated against the server's JSON schema, not a pydantic model."""

    model_config = ConfigDict(extra="allow")


def _input_schema(tool: mcp_types.Tool) -> dict[str, Any]:
    schema = dict(tool.input_schema or {})
    schema.pop("title", None)
    schema.setdefault("type", "object")
    schema.setdefault("properties", {})
    try:  # no remote $ref, patterns RE2 can run: the server's schema is not trusted
        untrusted_validator(schema)
    except UntrustedSchemaError as exc:
        log.warning("MCP tool %s has an invalid input schema (%s); any object passes", tool, exc)
        return {"type": "object", "properties": {}}
    return schema


@dataclass(frozen=True, eq=False)
class McpTool(Tool):
    """A tool of an MCP server; ``run`` sends the raw arguments to the server."""

    server: Endpoint | None = None
    remote_name: str = ""

    async def run(self, ctx: ToolContext, arguments: dict[str, Any]) -> ToolReply:
        assert self.server is not None
        return await self.server.call(ctx, self.remote_name, arguments)


class McpTools:
    """Every configured MCP server of one executor, and their tools in its registry.

    :meth:`start` launches the shared servers' supervisors and lists each per-key server's
    tools from a probe instance, waiting (each at most its ``connect_timeout_s``) until every
    server is up or has failed a first time, so the first turns see the tools of every server
    that could start; a server that comes up later adds its tools then. ``on_change`` is called
    whenever the set of tools or a server's state changes (the executor republishes its
    catalogue).
    """

    def __init__(
        self,
        servers: Mapping[str, McpServerConfig],
        registry: ToolRegistry,
        *,
        working_root: Path,
        sandbox: SandboxConfig | None = None,
        environ: Mapping[str, str] | None = None,
        on_change: Callable[[], None] | None = None,
    ) -> None:
        env = dict(os.environ if environ is None else environ)
        self.shared = {
            name: McpServer(name, config, env, listener=self._changed)
            for name, config in servers.items()
            if config.shared
        }
        self.keyed = {
            name: KeyedMcpServer(
                name,
                config,
                env,
                working_root=working_root,
                sandbox=sandbox or SandboxConfig(),
                listener=self._changed,
            )
            for name, config in servers.items()
            if config.per_key
        }
        self.registry = registry
        self.on_change = on_change
        self._tasks: list[asyncio.Task[None]] = []

    async def start(self) -> None:
        for server in self.shared.values():
            self._tasks.append(asyncio.create_task(server.supervise(), name=f"mcp-{server.name}"))
        await asyncio.gather(
            *(server.wait_started() for server in self.shared.values()),
            *(server.probe() for server in self.keyed.values()),
        )

    def _changed(self, server: McpServer | KeyedMcpServer) -> None:
        if server.state == "up":
            self._register(server)
        if self.on_change is not None:
            self.on_change()

    def _register(self, server: Endpoint) -> None:
        for remote in server.tools:
            name = exposed_name(server.name, remote.name)
            existing = self.registry.get(name)
            if existing is not None and not (
                isinstance(existing, McpTool) and existing.server is server
            ):
                log.warning(
                    "MCP tool %s of %s clashes with tool %s; skipped",
                    remote.name,
                    server.name,
                    name,
                )
                continue
            metadata: dict[str, Any] = {"origin": "mcp", "server": server.name}
            if server.config.shared:
                metadata["shared"] = True
            self.registry.put(
                McpTool(
                    name=name,
                    description=remote.description or remote.title or remote.name,
                    fn=server.call,
                    arguments=_AnyArguments,
                    input_schema=_input_schema(remote),
                    read_only=bool(remote.annotations and remote.annotations.read_only_hint),
                    effects=_effects(remote),
                    metadata=metadata,
                    server=server,
                    remote_name=remote.name,
                )
            )

    def status(self) -> list[CatalogueServer]:
        shared = [
            CatalogueServer(
                name=server.name,
                transport="http" if server.config.url is not None else "stdio",
                state=server.state,
                tools=len(server.tools),
                error=server.last_error,
                restarts=server.restarts,
            )
            for server in self.shared.values()
        ]
        return shared + [server.status() for server in self.keyed.values()]

    async def aclose(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks.clear()
        await asyncio.gather(*(server.aclose() for server in self.keyed.values()))


def _effects(remote: mcp_types.Tool) -> Effects:
    """What the server's annotations say (hints; absent ones mean the worst: ``unsafe``)."""
    hints = remote.annotations
    if hints is not None and hints.read_only_hint:
        return "none"
    if hints is not None and hints.idempotent_hint:
        return "idempotent"
    return "unsafe"
