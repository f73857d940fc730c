"""The OpenAPI document, with what only this gateway's configuration knows filled in.

The verification checks a client may name are the operator's (``verifier.commands``), so the
schema lists exactly those names: a client (or a fuzzer) reading the document never has to
guess, and a name outside the list is schema-invalid, not only refused. The same holds for
the experience categories (``memory.categories``).
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi

VERIFICATION_SCHEMA = "VerificationBody"


EXPERIENCE_BODIES = ("CreateExperience", "PatchExperience")


def configured_openapi(
    app: FastAPI, checks: Collection[str], categories: Collection[str] = ()
) -> Callable[[], dict[str, Any]]:
    def build() -> dict[str, Any]:
        if app.openapi_schema is None:
            document = get_openapi(
                title=app.title,
                version=app.version,
                description=app.description,
                routes=app.routes,
            )
            schemas = document.get("components", {}).get("schemas", {})
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
