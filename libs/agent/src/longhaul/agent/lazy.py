"""Package fronts that load their names on first use (PEP 562).

``longhaul.agent`` re-exports the engine, middleware and tools; importing them eagerly would
make every light submodule (``tools.childproc`` for a process that only starts children)
pay for the whole engine, and hid an import cycle behind the order of those imports.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any


def lazy_getattr(package: str, homes: Mapping[str, str]) -> Callable[[str], Any]:
    """The module ``__getattr__`` of ``package``: ``name`` is imported from ``homes[name]``
    when first asked for, then kept in the package's namespace."""

    def load(name: str) -> Any:
        if name not in homes:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(homes[name]), name)
        setattr(importlib.import_module(package), name, value)
        return value

    return load
