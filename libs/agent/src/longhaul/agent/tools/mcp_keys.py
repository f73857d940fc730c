"""Per-key MCP servers: one instance per API key (or per trace family), never shared.

A command server that is not ``shared`` runs once per key, started by the first call that key
makes, confined like ``bash`` (:mod:`longhaul.agent.tools.sandbox`): its cwd and only writable
path is the key's directory (``<working root>/keys/<owner>/``; with ``scope: family`` the
family's own directory below it), so one key's server cannot see another key's files whatever
paths it is asked for. An instance unused for ``idle_s`` ends; the key's next call starts a new
one. A url server with ``headers_per_key`` is a session per key carrying that key's headers.

The tools are the same for every key, so they are listed once, at start, from a probe instance
in a scratch directory that no key owns (removed right after); a server whose probe failed
lists its tools when its first instance comes up. ``GET /api/tools`` thus shows a per-key
server's tools without a process per key. Traces with no owner (written to the log directly,
not through the gateway) share one instance in ``<working root>/unowned/`` (or, with ``scope:
family``, their family's directory below it), never the root.
"""

from __future__ import annotations

import asyncio
import shutil
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import mcp_types
from longhaul.agent.errors import ToolError
from longhaul.agent.tools.catalogue import CatalogueServer, ServerState
from longhaul.agent.tools.context import ToolContext
from longhaul.agent.tools.mcp import McpServer, Placement
from longhaul.agent.tools.result import ToolResult
from longhaul.agent.tools.sandbox import Sandbox, program_paths
from longhaul.agent.workdir import KEYS_DIR, trace_home
from longhaul.domain.config import McpServerConfig, SandboxConfig


class KeyedMcpServer:
    """A configured per-key server: its instances by key (or family) and their one listing."""

    def __init__(
        self,
        name: str,
        config: McpServerConfig,
        environ: Mapping[str, str],
        *,
        working_root: Path,
        sandbox: SandboxConfig,
        listener: Callable[[KeyedMcpServer], None] | None = None,
    ) -> None:
        self.name = name
        self.config = config
        self.environ = environ
        self.root = working_root.resolve()
        # what the server executes is readable inside, wherever the operator put it
        argv = [config.command, *config.args] if config.command is not None else []
        path = config.env.get("PATH", environ.get("PATH"))
        extra = [*sandbox.read_only, *config.read_only, *program_paths(argv, path)]
        self.sandbox = Sandbox(sandbox.model_copy(update={"read_only": extra}))
        self.listener = listener
        self.tools: list[mcp_types.Tool] = []
        self.last_error: str | None = None
        self.state: ServerState = "starting"
        self.instances: dict[str, McpServer] = {}
        self._tasks: dict[str, asyncio.Task[None]] = {}
        self._ended_restarts = 0

    def _instance(self, key: str, placement: Placement, idle_s: float | None) -> McpServer:
        server = McpServer(
            self.name,
            self.config,
            self.environ,
            listener=self._changed,
            placement=placement,
            idle_s=idle_s,
        )
        task = asyncio.create_task(server.supervise(), name=f"mcp-{self.name}-{key}")
        self.instances[key] = server
        self._tasks[key] = task
        task.add_done_callback(lambda _: self._ended(key, server))
        return server

    def _ended(self, key: str, server: McpServer) -> None:
        if self.instances.get(key) is server:
            del self.instances[key]
            del self._tasks[key]
            self._ended_restarts += server.restarts
            self._signal()  # the catalogue shows one instance fewer

    async def probe(self) -> None:
        """List the tools from an instance in a scratch directory, then stop it."""
        scratch = Path(tempfile.mkdtemp(prefix=f"longhaul-mcp-{self.name}-"))
        try:
            headers = next(iter(self.config.headers_per_key.values()), {})
            server = self._instance("", Placement(scratch, self.sandbox, headers), None)
            await server.wait_started()
            if server.state != "up":
                self.last_error = server.last_error
                self.state = "down"
                self._signal()
        finally:
            task = self._tasks.get("")
            if task is not None:
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
            shutil.rmtree(scratch, ignore_errors=True)

    def _changed(self, server: McpServer) -> None:
        if server.state == "up" and not self.tools:
            self.tools = server.tools
            self.state = "up"
        if server.state == "down":
            self.last_error = server.last_error
        self._signal()

    def _signal(self) -> None:
        if self.listener is not None:
            self.listener(self)

    def _place(self, ctx: ToolContext) -> tuple[str, Placement]:
        owner = ctx.state.owner
        if self.config.headers_per_key:
            headers = self.config.headers_per_key.get(owner or "")
            if headers is None:
                raise ToolError(
                    f"MCP server {self.name} has no credentials for this API key",
                    code="mcp_unavailable",
                )
            return owner or "", Placement(headers=headers)
        home = trace_home(self.root, ctx.state)
        if self.config.scope != "family":
            home = home.parent
        assert home.is_relative_to(self.root) and home not in (self.root, self.root / KEYS_DIR)
        home.mkdir(parents=True, exist_ok=True)
        return str(home.relative_to(self.root)), Placement(home, self.sandbox)

    async def call(self, ctx: ToolContext, tool: str, arguments: dict[str, Any]) -> ToolResult:
        """Call ``tool`` on the caller's instance, starting it if it is not running."""
        key, placement = self._place(ctx)
        server = self.instances.get(key)
        if server is None or server.state == "idle":
            server = self._instance(key, placement, self.config.idle_s)
        return await server.call(ctx, tool, arguments)

    def status(self) -> CatalogueServer:
        running = list(self.instances.values())
        return CatalogueServer(
            name=self.name,
            transport="http" if self.config.url is not None else "stdio",
            state=self.state,
            tools=len(self.tools),
            error=self.last_error,
            restarts=self._ended_restarts + sum(server.restarts for server in running),
            scope=self.config.scope,
            instances=len(running),
        )

    async def aclose(self) -> None:
        tasks = list(self._tasks.values())
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
