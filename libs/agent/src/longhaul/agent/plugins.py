"""Loading what operators name in configuration: ``package.module:attribute``, or the name of
an entry point in a group (an installed plugin). Middleware and context hooks load this way;
a failure is a ``ValueError`` naming the config key, so a bad entry stops start-up."""

from __future__ import annotations

import importlib
from importlib.metadata import entry_points
from typing import Any


def load(target: str, *, group: str, where: str) -> Any:
    if ":" in target:
        module_name, _, attribute = target.partition(":")
        try:
            return getattr(importlib.import_module(module_name), attribute)
        except (ImportError, AttributeError) as exc:
            raise ValueError(f"{where}: cannot load {target!r}: {exc}") from exc
    matches = entry_points(group=group, name=target)
    if not matches:
        raise ValueError(
            f"{where}: no {target!r} in the {group!r} entry points "
            "(give module:attribute, or install the plugin that provides it)"
        )
    try:
        return next(iter(matches)).load()
    except (ImportError, AttributeError) as exc:
        raise ValueError(f"{where}: cannot load entry point {target!r}: {exc}") from exc
