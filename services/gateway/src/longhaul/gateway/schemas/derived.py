"""API views derived from the domain's msgspec structs, so a shape is declared once.

The gateway answers with what the fold holds; its OpenAPI document needs pydantic models of
those shapes. Writing them by hand would declare every message field twice and let the two
drift; :func:`view_of` builds the model from the struct's own fields instead (nested structs
become nested views, defaults carried over).
"""

from __future__ import annotations

import functools
import types
import typing
from typing import Any, Literal

import msgspec
from pydantic import BaseModel, Field, create_model


def view_of(
    struct: type[msgspec.Struct],
    *,
    name: str | None = None,
    exclude: frozenset[str] = frozenset(),
    extra: dict[str, Any] | None = None,
) -> type[BaseModel]:
    """A pydantic model of ``struct``'s fields minus ``exclude``, plus ``extra`` fields
    (``name: (annotation, default)``)."""
    fields: dict[str, Any] = {}
    for field in msgspec.structs.fields(struct):
        if field.name in exclude:
            continue
        fields[field.name] = (_translate(field.type), _default(field))
    fields.update(extra or {})
    model: type[BaseModel] = create_model(
        name or f"{struct.__name__}View", __doc__=struct.__doc__, **fields
    )
    return model


@functools.cache
def _nested(struct: type[msgspec.Struct]) -> type[BaseModel]:
    return view_of(struct)


def _default(field: msgspec.structs.FieldInfo) -> Any:
    if field.default is not msgspec.NODEFAULT:
        return field.default
    if field.default_factory is not msgspec.NODEFAULT:
        return Field(default_factory=field.default_factory)
    return ...


def _translate(annotation: Any) -> Any:
    """``annotation`` with every msgspec struct in it replaced by its view."""
    if isinstance(annotation, type) and issubclass(annotation, msgspec.Struct):
        return _nested(annotation)
    origin = typing.get_origin(annotation)
    if origin is None or origin is Literal:
        return annotation
    args = tuple(_translate(arg) for arg in typing.get_args(annotation))
    if origin in (types.UnionType, typing.Union):
        return typing.Union[args]  # noqa: UP007 (built from a runtime tuple)
    return origin[args]
