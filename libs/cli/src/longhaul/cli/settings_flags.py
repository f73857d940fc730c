"""Command-line flags for trace settings, taken from the domain's ``TraceSettings``: a flag's
bounds (``--max-iterations`` at least 1) and help are the ones the API checks, not restated."""

from __future__ import annotations

import typing
from typing import Any

import msgspec
import typer
from longhaul.domain.settings import TraceSettings

JSON_SAFE = 2**53
_FIELDS = {field.name: field.type for field in msgspec.structs.fields(TraceSettings)}


def setting_option(name: str, *param_decls: str, help: str | None = None) -> Any:
    """A ``typer.Option`` for the setting ``name``; ``help`` replaces the domain's wording."""
    metas = list(_metas(_FIELDS[name]))
    bounds = {
        key: getattr(m, key) for m in metas for key in ("ge", "le") if getattr(m, key) is not None
    }
    described = next((m.description for m in metas if m.description), None)
    return typer.Option(
        *param_decls, help=help or described, min=bounds.get("ge"), max=bounds.get("le")
    )


def _metas(annotation: Any) -> typing.Iterator[msgspec.Meta]:
    """Every ``msgspec.Meta`` on ``annotation``, outermost first (a list's items excluded:
    their bounds are not the flag's)."""
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        inner, *metas = typing.get_args(annotation)
        yield from (m for m in metas if isinstance(m, msgspec.Meta))
        yield from _metas(inner)
    elif origin is not list:
        for arg in typing.get_args(annotation):
            yield from _metas(arg)
