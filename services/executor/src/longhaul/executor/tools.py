"""The tool registry an executor offers: the built-ins plus tools from
``LONGHAUL_EXECUTOR__TOOL_MODULES``.

Each listed module (``pkg.module``, comma-separated) is imported once at start. It either
defines ``register(registry: ToolRegistry) -> None`` or exposes ``TOOLS``, an iterable of
:class:`~longhaul.agent.tools.Tool` (functions decorated with ``@tool``). A module that fails
to import, or defines neither, stops the executor at start with a clear message rather than
serving traces without the tools they expect.
"""

from __future__ import annotations

import importlib

from longhaul.agent.tools import Tool, ToolRegistry, builtin_tools


class ToolModuleError(RuntimeError):
    """A configured tool module cannot be loaded."""


def load_tools(modules: list[str]) -> ToolRegistry:
    registry = builtin_tools()
    for name in modules:
        try:
            module = importlib.import_module(name)
        except ImportError as exc:
            raise ToolModuleError(f"tool module {name!r} cannot be imported: {exc}") from exc
        register = getattr(module, "register", None)
        if callable(register):
            register(registry)
            continue
        tools = getattr(module, "TOOLS", None)
        if tools is None:
            raise ToolModuleError(f"tool module {name!r} defines neither register() nor TOOLS")
        for item in tools:
            if not isinstance(item, Tool):
                raise ToolModuleError(f"{name}.TOOLS holds {item!r}, which is not a Tool")
            registry.register(item)
    return registry
