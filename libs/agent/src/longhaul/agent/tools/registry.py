"""``ToolRegistry``: the tools a trace may use, and their specs in offer order."""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from longhaul.agent.tools.base import Tool
from longhaul.llm.types import ToolSpec


class ToolRegistry:
    """An ordered, immutable-by-convention set of tools; narrowing returns a new registry."""

    def __init__(self, tools: Iterable[Tool] = ()) -> None:
        self._tools: dict[str, Tool] = {}
        for item in tools:
            self.register(item)
        self._specs: list[ToolSpec] | None = None

    def register(self, item: Tool) -> None:
        if item.name in self._tools:
            raise ValueError(f"tool {item.name!r} is registered twice")
        self._tools[item.name] = item
        self._specs = None

    def put(self, item: Tool) -> None:
        """Register ``item`` or replace the tool of that name (a remote tool listed again)."""
        self._tools[item.name] = item
        self._specs = None

    def get(self, name: str) -> Tool | None:
        return self._tools.get(name)

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def __iter__(self) -> Iterator[Tool]:
        return iter(self._tools.values())

    def __len__(self) -> int:
        return len(self._tools)

    def names(self) -> list[str]:
        return list(self._tools)

    def specs(self) -> list[ToolSpec]:
        """Cached: the same list object is offered on every step of a turn."""
        if self._specs is None:
            self._specs = [item.spec for item in self._tools.values()]
        return self._specs

    def only(self, names: Iterable[str]) -> ToolRegistry:
        wanted = set(names)
        return ToolRegistry(item for item in self._tools.values() if item.name in wanted)

    def without(self, names: Iterable[str]) -> ToolRegistry:
        unwanted = set(names)
        return ToolRegistry(item for item in self._tools.values() if item.name not in unwanted)

    def read_only(self) -> ToolRegistry:
        return ToolRegistry(item for item in self._tools.values() if item.read_only)
