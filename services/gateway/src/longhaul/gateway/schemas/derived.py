"""API views and request fields derived from the domain's msgspec structs, so a shape is
declared once.

The gateway answers with what the fold holds; its OpenAPI document needs pydantic models of
those shapes. Writing them by hand would declare every message field twice and let the two
drift; :func:`view_of` builds the model from the struct's own fields instead (nested structs
become nested views, defaults carried over).
"""

from __future__ import annotations

import functools
import types
import typing
from collections.abc import Iterable, Mapping
from typing import Any, Literal

import msgspec
from longhaul.gateway.schemas.common import integral
from pydantic import BaseModel, BeforeValidator, Field, create_model
from pydantic.fields import FieldInfo


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


_CONSTRAINTS = ("ge", "gt", "le", "lt", "pattern", "min_length", "max_length", "description")


def input_fields(
    struct: type[msgspec.Struct],
    names: Iterable[str],
    *,
    bodies: Mapping[type[msgspec.Struct], type[BaseModel]],
    descriptions: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """Request-body fields (for ``create_model``) of ``struct``'s fields named in ``names``, in
    the struct's order: ``msgspec.Meta`` constraints become pydantic's (integers also take
    integral JSON numbers such as ``7.0``, floats refuse inf and NaN), a nested struct becomes
    its request model in ``bodies``, and ``descriptions`` replace a field's own."""
    wanted = set(names)
    fields: dict[str, Any] = {}
    for field in msgspec.structs.fields(struct):
        if field.name not in wanted:
            continue
        annotation, description = _described(field.type)
        if descriptions and field.name in descriptions:
            description = descriptions[field.name]
        default = _default(field)
        info = (
            default
            if isinstance(default, FieldInfo)
            else Field(default=default, description=description)
        )
        fields[field.name] = (_constrained(annotation, bodies), info)
    return fields


def _described(annotation: Any) -> tuple[Any, str | None]:
    """``annotation`` without its outermost description-only ``Meta``, and that description:
    it describes the field, not the value inside an optional."""
    if typing.get_origin(annotation) is typing.Annotated:
        inner, *metas = typing.get_args(annotation)
        if len(metas) == 1 and _meta_kwargs(metas[0]).keys() == {"description"}:
            return inner, metas[0].description
    return annotation, None


def _meta_kwargs(meta: Any) -> dict[str, Any]:
    if not isinstance(meta, msgspec.Meta):
        return {}
    return {key: getattr(meta, key) for key in _CONSTRAINTS if getattr(meta, key) is not None}


def _constrained(annotation: Any, bodies: Mapping[type[msgspec.Struct], type[BaseModel]]) -> Any:
    if isinstance(annotation, type) and issubclass(annotation, msgspec.Struct):
        return bodies[annotation]
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        inner, *metas = typing.get_args(annotation)
        kwargs: dict[str, Any] = {}
        for meta in metas:
            kwargs.update(_meta_kwargs(meta))
        if inner is float:
            kwargs["allow_inf_nan"] = False
        # the bounds come before the validator so they reach the JSON schema
        extra: tuple[Any, ...] = (BeforeValidator(integral),) if inner is int else ()
        return typing.Annotated[(_constrained(inner, bodies), Field(**kwargs), *extra)]
    if origin is None or origin is Literal:
        return annotation
    args = tuple(_constrained(arg, bodies) for arg in typing.get_args(annotation))
    if origin in (types.UnionType, typing.Union):
        return typing.Union[args]  # noqa: UP007 (built from a runtime tuple)
    return origin[args]
