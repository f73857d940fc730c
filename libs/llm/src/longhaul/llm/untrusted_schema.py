"""Validating against a JSON schema someone else wrote: a client's ``verification.json_schema``,
an MCP server's tool schema.

Two things make jsonschema unsafe for that. A ``$ref`` to a URL is fetched (loopback, a cloud
metadata address, anything the service can reach), and its document then shows up in errors;
here the registry refuses every retrieval, so only references inside the schema resolve. And
``pattern`` / ``patternProperties`` run on Python's backtracking ``re``, where ``(a+)+$`` on
forty characters takes hours on the event loop; here they run on RE2, which matches in linear
time (and has no backreferences or lookaround: a schema using them is refused).
``unevaluatedProperties`` beside ``patternProperties`` would still reach ``re`` inside
jsonschema, so that combination is refused too.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from typing import Any

import re2
from jsonschema import Draft202012Validator, ValidationError, validators
from jsonschema.exceptions import SchemaError
from referencing import Registry, Resource
from referencing.exceptions import NoSuchResource

MAX_PATTERN_LENGTH = 1000


class UntrustedSchemaError(ValueError):
    """The schema cannot be used: invalid, or asking for something refused here."""


def _refuse(uri: str) -> Resource[Any]:
    raise NoSuchResource(uri)


NO_RETRIEVAL: Registry[Any] = Registry(retrieve=_refuse)  # type: ignore[call-arg]


@functools.lru_cache(maxsize=256)
def _compiled(pattern: str) -> Any:
    if len(pattern) > MAX_PATTERN_LENGTH:
        raise UntrustedSchemaError(f"pattern longer than {MAX_PATTERN_LENGTH} characters")
    options = re2.Options()
    options.log_errors = False
    try:
        return re2.compile(pattern, options)
    except re2.error as exc:
        raise UntrustedSchemaError(
            f"pattern {pattern[:80]!r} is not supported ({exc}); patterns run on RE2, "
            "without backreferences or lookaround"
        ) from exc


def search(pattern: str, text: str) -> bool:
    """Whether ``pattern`` (a client's) matches in ``text``, in linear time (RE2);
    :class:`UntrustedSchemaError` for a pattern RE2 cannot run."""
    return _compiled(pattern).search(text) is not None


def _pattern(validator: Any, pattern: str, instance: Any, schema: Any) -> Iterator[ValidationError]:
    if validator.is_type(instance, "string") and not _compiled(pattern).search(instance):
        yield ValidationError(f"{instance[:200]!r} does not match {pattern[:200]!r}")


def _pattern_properties(
    validator: Any, patterns: dict[str, Any], instance: Any, schema: Any
) -> Iterator[ValidationError]:
    if not validator.is_type(instance, "object"):
        return
    for pattern, subschema in patterns.items():
        regex = _compiled(pattern)
        for key, value in instance.items():
            if regex.search(key):
                yield from validator.descend(value, subschema, path=key, schema_path=pattern)


def _additional_properties(
    validator: Any, allowed: Any, instance: Any, schema: Any
) -> Iterator[ValidationError]:
    if not validator.is_type(instance, "object"):
        return
    named = schema.get("properties", {})
    patterns = [_compiled(p) for p in schema.get("patternProperties", {})]
    extras = [
        key
        for key in instance
        if key not in named and not any(regex.search(key) for regex in patterns)
    ]
    if validator.is_type(allowed, "object"):
        for extra in extras:
            yield from validator.descend(instance[extra], allowed, path=extra)
    elif not allowed and extras:
        listed = ", ".join(repr(extra) for extra in sorted(extras)[:20])
        verb = "was" if len(extras) == 1 else "were"
        yield ValidationError(f"Additional properties are not allowed ({listed} {verb} unexpected)")


UntrustedValidator = validators.extend(
    Draft202012Validator,
    {
        "pattern": _pattern,
        "patternProperties": _pattern_properties,
        "additionalProperties": _additional_properties,
    },
)


def _walk(node: Any) -> Iterator[dict[str, Any]]:
    if isinstance(node, dict):
        yield node
        for value in node.values():
            yield from _walk(value)
    elif isinstance(node, list):
        for value in node:
            yield from _walk(value)


def untrusted_validator(schema: dict[str, Any]) -> Any:
    """A validator for ``schema`` that fetches nothing and matches patterns in linear time;
    raises :class:`UntrustedSchemaError` naming what is wrong with the schema."""
    try:
        Draft202012Validator.check_schema(schema)
    except SchemaError as exc:
        raise UntrustedSchemaError(f"invalid JSON schema: {exc.message}") from exc
    for node in _walk(schema):
        if isinstance(node.get("pattern"), str):
            _compiled(node["pattern"])
        properties = node.get("patternProperties")
        if isinstance(properties, dict):
            for pattern in properties:
                _compiled(pattern)
            if "unevaluatedProperties" in node:
                raise UntrustedSchemaError(
                    "unevaluatedProperties beside patternProperties is not supported"
                )
        for keyword in ("$ref", "$dynamicRef"):
            ref = node.get(keyword)
            if isinstance(ref, str) and not ref.startswith("#"):
                raise UntrustedSchemaError(
                    f"{keyword} {ref[:200]!r} points outside the schema; only local references "
                    "(#/…) are followed, nothing is fetched"
                )
    return UntrustedValidator(schema, registry=NO_RETRIEVAL)
