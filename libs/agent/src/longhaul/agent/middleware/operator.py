"""Operators' own middleware: loaded from configuration, placed among the built-ins.

An entry of ``pipeline.middleware`` with ``use`` names a class (``package.module:Class``) or an
entry point of the ``longhaul.middleware`` group (for an installed plugin). It is built with
``options`` as keyword arguments and placed ``before`` or ``after`` a middleware already in the
chain (default: after the last configurable one). The pinned framework ends stay where they are:
nothing goes outside them. Every problem is a ``ValueError`` naming the entry, raised when the
chain is built, so a bad configuration stops a service at start-up, not mid-run.
"""

from __future__ import annotations

from longhaul.agent import plugins
from longhaul.agent.middleware.base import Middleware
from longhaul.domain.config import MiddlewareEntry

ENTRY_POINT_GROUP = "longhaul.middleware"


def load_class(entry: MiddlewareEntry) -> type[Middleware]:
    target = entry.use or ""
    where = f"pipeline.middleware[{entry.name}].use"
    found = plugins.load(target, group=ENTRY_POINT_GROUP, where=where)
    if not (isinstance(found, type) and issubclass(found, Middleware)):
        raise ValueError(f"{where}: {target!r} is not a longhaul Middleware subclass")
    return found


def build(entry: MiddlewareEntry) -> Middleware:
    cls = load_class(entry)
    try:
        return cls(**entry.options)
    except TypeError as exc:
        raise ValueError(f"pipeline.middleware[{entry.name}].options: {exc}") from exc


def place(
    chain: list[tuple[str, Middleware]],
    entry: MiddlewareEntry,
    middleware: Middleware,
    *,
    outer: frozenset[str],
    inner: frozenset[str],
) -> None:
    """Insert ``(entry.name, middleware)`` into ``chain`` (outermost first) where the entry says:
    inside the ``outer`` framework layers and outside the ``inner`` ones."""
    if entry.before and entry.after:
        raise ValueError(f"pipeline.middleware[{entry.name}]: give before or after, not both")
    names = [name for name, _ in chain]
    if entry.name in names:
        raise ValueError(f"pipeline.middleware[{entry.name}]: the name is already in the chain")
    lowest = max((names.index(n) + 1 for n in outer if n in names), default=0)
    highest = min((names.index(n) for n in inner if n in names), default=len(names))
    anchor = entry.before or entry.after
    if anchor is None:
        index = highest
    elif anchor not in names:
        raise ValueError(
            f"pipeline.middleware[{entry.name}]: no middleware {anchor!r} to place it "
            f"{'before' if entry.before else 'after'} ({', '.join(names)})"
        )
    else:
        index = names.index(anchor) + (0 if entry.before else 1)
    if not lowest <= index <= highest:
        raise ValueError(
            f"pipeline.middleware[{entry.name}]: cannot go outside the framework layers "
            f"({', '.join(sorted(outer | inner))})"
        )
    chain.insert(index, (entry.name, middleware))
