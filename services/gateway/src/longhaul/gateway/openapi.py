"""The OpenAPI document, with what only this gateway's configuration knows filled in.

The verification checks a client may name are the operator's (``verifier.commands``), so the
schema lists exactly those names: a client (or a fuzzer) reading the document never has to
guess, and a name outside the list is schema-invalid, not only refused. The same holds for
the experience categories (``memory.categories``). The event streams' typed events are
described by ``sse_schema``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection
from typing import Any

from fastapi import FastAPI
from fastapi.encoders import jsonable_encoder
from fastapi.openapi.models import Schema
from fastapi.openapi.utils import get_openapi
from longhaul.domain.settings import MODEL_PATTERN, MODEL_SPEC
from longhaul.gateway.errors import ErrorBody
from longhaul.gateway.sse_schema import document_event_streams
from pydantic.json_schema import models_json_schema

VERIFICATION_SCHEMA = "VerificationBody"


EXPERIENCE_BODIES = ("CreateExperience", "PatchExperience")


def model_pattern(providers: Collection[str], scripts: Collection[str]) -> str:
    """Model strings this gateway accepts: a known or configured provider, or one of the
    built-in scripts (``scripted:<file>`` under ``models.scripted_dir`` is accepted too, but
    no pattern can say which files exist there)."""
    names = "|".join(re.escape(name) for name in sorted(providers))
    builtin = "|".join(re.escape(name) for name in sorted(scripts))
    return rf"^(?:(?:{names}):{MODEL_SPEC}|scripted:(?:{builtin})(?:\?[A-Za-z0-9_=&.]*)?)$"


def _with_error_schemas(schemas: dict[str, Any]) -> dict[str, Any]:
    """The components' schemas with the error body's, which every route refers to by name
    (``errors.ERROR_RESPONSES``), in FastAPI's order (by name)."""
    _, top = models_json_schema(
        [(ErrorBody, "serialization")], ref_template="#/components/schemas/{model}"
    )
    errors = {
        name: jsonable_encoder(Schema(**schema), by_alias=True, exclude_none=True)
        for name, schema in top["$defs"].items()
    }  # encoded as get_openapi encodes the rest
    return dict(sorted({**schemas, **errors}.items()))


def _replace_pattern(node: Any, old: str, new: str) -> None:
    if isinstance(node, dict):
        if node.get("pattern") == old:
            node["pattern"] = new
        for value in node.values():
            _replace_pattern(value, old, new)
    elif isinstance(node, list):
        for value in node:
            _replace_pattern(value, old, new)


def configured_openapi(
    app: FastAPI,
    checks: Collection[str],
    categories: Collection[str] = (),
    models: str | None = None,
) -> Callable[[], dict[str, Any]]:
    """``models``: the pattern of the model strings this gateway accepts
    (:func:`model_pattern`), in place of the generic ``provider:model`` shape."""

    def build() -> dict[str, Any]:
        if app.openapi_schema is None:
            document = get_openapi(
                title=app.title,
                version=app.version,
                description=app.description,
                routes=app.routes,
            )
            components = document.setdefault("components", {})
            components["schemas"] = _with_error_schemas(components.get("schemas", {}))
            document_event_streams(document)
            schemas = components["schemas"]
            if models is not None:
                _replace_pattern(document, MODEL_PATTERN, models)
            for name in EXPERIENCE_BODIES:
                if categories and name in schemas:
                    enum = {"type": "string", "enum": sorted(categories)}
                    field = schemas[name]["properties"]["category"]
                    if "anyOf" in field:
                        field["anyOf"] = [enum, {"type": "null"}]
                    else:
                        field.update(enum)
                        field.pop("pattern", None)
            body = schemas.get(VERIFICATION_SCHEMA)
            if body is not None:
                if checks:
                    body["properties"]["check"] = {
                        "type": "string",
                        "enum": sorted(checks),
                        "description": "one of the operator's verifier.commands",
                    }
                else:  # none configured: no check can be named
                    body["properties"].pop("check", None)
            app.openapi_schema = document
        return app.openapi_schema

    return build
