"""The tools an executor offers: the built-ins (the opt-in ``view_image`` and browser tools
among them, for presets that name them), ``web_search`` when ``tools.web_search`` is
configured, tools from ``LONGHAUL_EXECUTOR__TOOL_MODULES``, the configured MCP servers' tools
(``tools.mcp_servers``), and its published catalogue.

Each listed module (``pkg.module``, comma-separated) is imported once at start. It either
defines ``register(registry: ToolRegistry) -> None`` or exposes ``TOOLS``, an iterable of
:class:`~longhaul.agent.tools.Tool` (functions decorated with ``@tool``). A module that fails
to import, or defines neither, stops the executor at start with a clear message rather than
serving traces without the tools they expect.

:class:`ExecutorTools` starts the shared MCP servers and lists each per-key one's tools from
a probe instance before it consumes, so the first turns see them (a per-key server's instances
start on a key's first call, in the sandbox: :mod:`longhaul.agent.tools.mcp_keys`), and writes
the catalogue ``GET /api/tools`` serves to the workspace (see
:mod:`longhaul.agent.tools.catalogue`) at start and on every server change.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import importlib.metadata
import logging
import os
from collections.abc import Mapping
from pathlib import Path
from types import ModuleType

import msgspec
from longhaul.agent.tools import BUILTIN_TOOLS, Tool, ToolRegistry, builtin_tools
from longhaul.agent.tools.builtin import OPT_IN_TOOLS
from longhaul.agent.tools.catalogue import build_catalogue, catalogue_key
from longhaul.agent.tools.mcp_tools import McpTools
from longhaul.agent.tools.search import backend_for, web_search_tool
from longhaul.core.workspace import WorkspaceStore
from longhaul.domain.config import ConfigError, OnUnknown, SandboxConfig, ToolsConfig

log = logging.getLogger(__name__)


class ToolModuleError(ConfigError):
    """A configured tool module cannot be loaded: the executor refuses to start, like with a
    bad configuration (``CONFIG_ERROR_EXIT``, not restarted)."""


ENTRY_POINT_GROUP = "longhaul.tools"
"""Installed packages add tools here: each entry point names a module (``TOOLS`` or
``register(registry)``), a :class:`Tool`, or a list of them."""


def load_tools(
    modules: list[str],
    config: ToolsConfig | None = None,
    environ: Mapping[str, str] | None = None,
) -> ToolRegistry:
    """The built-ins and the opt-in ones presets name, ``web_search`` when ``config`` has it
    (keys from ``environ``), the tools of installed packages (entry points of
    :data:`ENTRY_POINT_GROUP`), then the configured modules' tools."""
    registry = builtin_tools()
    for item in OPT_IN_TOOLS:
        registry.register(item)
    if config is not None and config.web_search is not None:
        registry.register(
            web_search_tool(config.web_search, os.environ if environ is None else environ)
        )
    for entry in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
        try:
            loaded = entry.load()
        except Exception as exc:
            raise ToolModuleError(
                f"tool entry point {entry.name!r} cannot be loaded: {exc}"
            ) from exc
        _register(registry, loaded, f"entry point {entry.name!r}")
    for name in modules:
        try:
            module = importlib.import_module(name)
        except ImportError as exc:
            raise ToolModuleError(f"tool module {name!r} cannot be imported: {exc}") from exc
        _register(registry, module, f"tool module {name!r}")
    return registry


def _register(registry: ToolRegistry, loaded: object, what: str) -> None:
    """A module's tools (``register(registry)`` or ``TOOLS``), one :class:`Tool`, or a list."""
    if isinstance(loaded, Tool):
        registry.register(loaded)
        return
    if isinstance(loaded, ModuleType):
        register = getattr(loaded, "register", None)
        if callable(register):
            register(registry)
            return
        loaded = getattr(loaded, "TOOLS", None)
        if loaded is None:
            raise ToolModuleError(f"{what} defines neither register() nor TOOLS")
    if not isinstance(loaded, list | tuple):
        raise ToolModuleError(f"{what} is neither a module, a Tool nor a list of them")
    for item in loaded:
        if not isinstance(item, Tool):
            raise ToolModuleError(f"{what} holds {item!r}, which is not a Tool")
        registry.register(item)


def tool_secrets(config: ToolsConfig, environ: Mapping[str, str]) -> dict[str, dict[str, str]]:
    """``tools.secrets`` with each value read from the executor's environment; a missing
    variable is a configuration error (the executor does not start without it)."""
    resolved: dict[str, dict[str, str]] = {}
    for tool, names in config.secrets.items():
        missing = [variable for variable in names.values() if variable not in environ]
        if missing:
            raise ConfigError(
                f"tools.secrets.{tool}: environment variable(s) {', '.join(missing)} not set "
                "for the executor"
            )
        resolved[tool] = {name: environ[variable] for name, variable in names.items()}
    return resolved


def tool_on_unknown(config: ToolsConfig, registry: ToolRegistry) -> dict[str, OnUnknown]:
    """``tools.on_unknown``, each name a tool this executor offers (an MCP tool as
    ``<server>__<tool>`` of a configured server): a misspelt one stops the start, not a crash
    recovery later."""
    servers = tuple(f"{server}__" for server in config.mcp_servers)
    unknown = [
        name
        for name in config.on_unknown
        if name not in registry and not (servers and name.startswith(servers))
    ]
    if unknown:
        raise ConfigError(
            f"tools.on_unknown: no tool named {', '.join(sorted(unknown))} "
            f"(tools: {', '.join(sorted(registry.names()))})"
        )
    return dict(config.on_unknown)


BUILTIN_NAMES = frozenset([*(item.name for item in (*BUILTIN_TOOLS, *OPT_IN_TOOLS)), "web_search"])
"""Tools of the harness itself (``web_search`` among them when configured)."""


def check_tools(config: ToolsConfig, environ: Mapping[str, str]) -> None:
    """What the executor needs to offer the configured tools (a search key, the secrets it
    grants) is there."""
    tool_secrets(config, environ)
    if config.web_search is not None:
        try:
            backend_for(config.web_search, environ)
        except ValueError as exc:
            raise ConfigError(str(exc)) from exc


class ExecutorTools:
    """The registry's MCP servers and the catalogue an executor publishes."""

    def __init__(
        self,
        workspace: WorkspaceStore,
        executor_id: str,
        registry: ToolRegistry,
        config: ToolsConfig,
        *,
        working_root: Path,
        sandbox: SandboxConfig,
    ) -> None:
        self.executor_id = executor_id
        self.registry = registry
        self.workspace = workspace
        self.mcp = McpTools(
            config.mcp_servers,
            registry,
            working_root=working_root,
            sandbox=sandbox,
            on_change=self._changed,
        )
        self._dirty = asyncio.Event()
        self._publisher: asyncio.Task[None] | None = None

    async def start(self) -> None:
        await self.mcp.start()
        await self._publish()
        self._publisher = asyncio.create_task(self._publish_changes(), name="tool-catalogue")

    def _changed(self) -> None:
        self._dirty.set()

    async def _publish_changes(self) -> None:
        while True:
            await self._dirty.wait()
            self._dirty.clear()
            await self._publish()

    async def _publish(self) -> None:
        catalogue = build_catalogue(
            self.executor_id, self.registry, BUILTIN_NAMES, self.mcp.status()
        )
        try:
            await self.workspace.put(
                catalogue_key(self.executor_id), msgspec.json.encode(catalogue)
            )
        except Exception as exc:  # the API shows an older catalogue; turns are unaffected
            log.warning("could not publish the tool catalogue: %s", exc)

    async def aclose(self) -> None:
        if self._publisher is not None:
            self._publisher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._publisher
        await self.mcp.aclose()
