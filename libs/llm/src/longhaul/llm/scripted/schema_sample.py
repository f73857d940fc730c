"""Deterministic example values for JSON schemas (what ``scripted:auto`` passes to tools).

Produces the smallest sensible instance: required properties only (plus optional ones when
``minProperties`` asks), one array item unless more are required, numbers near 1 inside the
bounds, strings named after their property. ``variant`` makes siblings differ, which
``uniqueItems`` needs. Local ``$ref`` (``#/$defs/...``), ``allOf``, ``anyOf``/``oneOf`` (first
branch, ``null`` last), ``const``, ``enum``, formats and ``pattern`` are understood.
"""

from __future__ import annotations

import math
import re
from typing import Any

from longhaul.llm.scripted.regex_sample import regex_sample

_FORMATS = {
    "date-time": "2024-01-01T00:00:00Z",
    "date": "2024-01-01",
    "time": "00:00:00Z",
    "email": "user@example.com",
    "uri": "https://example.com/",
    "url": "https://example.com/",
    "hostname": "example.com",
    "ipv4": "192.0.2.1",
    "ipv6": "2001:db8::1",
    "uuid": "00000000-0000-4000-8000-000000000000",
}
_MAX_DEPTH = 32
_DEEP = 6
_GRID_SEARCH = 2000


class SchemaSampler:
    """Samples sub-schemas of one root schema (the root resolves local ``$ref``)."""

    def __init__(self, root: dict[str, Any]) -> None:
        self._root = root

    def sample(self, schema: Any, variant: int = 0, name: str = "", depth: int = 0) -> Any:
        if depth > _MAX_DEPTH:
            return None
        if schema is True or schema == {} or not isinstance(schema, dict):
            return self._string({}, variant, name)
        schema = self._flatten(schema, depth)
        if "const" in schema:
            return schema["const"]
        if schema.get("enum"):
            return schema["enum"][variant % len(schema["enum"])]
        kind = self._type(schema)
        if kind == "object":
            return self._object(schema, depth)
        if kind == "array":
            return self._array(schema, name, depth)
        if kind in ("integer", "number"):
            return self._number(schema, variant, integer=kind == "integer")
        if kind == "boolean":
            return variant % 2 == 0
        if kind == "null":
            return None
        return self._string(schema, variant, name)

    def _resolve(self, ref: str) -> dict[str, Any]:
        node: Any = self._root
        for token in ref.removeprefix("#").strip("/").split("/"):
            if token:
                node = node[token.replace("~1", "/").replace("~0", "~")]
        return node if isinstance(node, dict) else {}

    def _flatten(self, schema: dict[str, Any], depth: int) -> dict[str, Any]:
        """Inline ``$ref``, ``allOf`` and the chosen ``anyOf``/``oneOf`` branch into one schema.
        Deep inside a recursive schema a ``null`` branch is preferred, so the value ends."""
        for _ in range(_MAX_DEPTH):
            if "$ref" in schema and isinstance(schema["$ref"], str):
                rest = {k: v for k, v in schema.items() if k != "$ref"}
                schema = _merge(self._resolve(schema["$ref"]), rest)
            elif "allOf" in schema:
                rest = {k: v for k, v in schema.items() if k != "allOf"}
                for part in schema["allOf"]:
                    rest = _merge(rest, part if isinstance(part, dict) else {})
                schema = rest
            elif "anyOf" in schema or "oneOf" in schema:
                key = "anyOf" if "anyOf" in schema else "oneOf"
                branches = [b for b in schema[key] if isinstance(b, dict)]
                branches.sort(key=lambda b: (b.get("type") == "null") != (depth > _DEEP))
                rest = {k: v for k, v in schema.items() if k != key}
                schema = _merge(rest, branches[0] if branches else {})
            else:
                return schema
        return schema

    @staticmethod
    def _type(schema: dict[str, Any]) -> str:
        kind = schema.get("type")
        if isinstance(kind, list):
            kinds = [k for k in kind if k != "null"] or ["null"]
            return str(kinds[0])
        if isinstance(kind, str):
            return kind
        if {"properties", "required", "additionalProperties", "minProperties"} & schema.keys():
            return "object"
        if {"items", "prefixItems", "minItems", "maxItems"} & schema.keys():
            return "array"
        if {
            "minimum",
            "maximum",
            "exclusiveMinimum",
            "exclusiveMaximum",
            "multipleOf",
        } & schema.keys():
            return "number"
        return "string"

    def _object(self, schema: dict[str, Any], depth: int) -> dict[str, Any]:
        properties = schema.get("properties") or {}
        keys = list(dict.fromkeys(schema.get("required") or []))
        wanted = schema.get("minProperties", 0)
        keys += [key for key in properties if key not in keys][: max(wanted - len(keys), 0)]
        extra = schema.get("additionalProperties", True)
        result = {}
        for key in keys:
            sub = properties.get(key, extra if isinstance(extra, dict) else {})
            result[key] = self.sample(sub, 0, key, depth + 1)
        for n in range(max(wanted - len(result), 0)):
            result[f"extra_{n}"] = self.sample(
                extra if isinstance(extra, dict) else {}, n, "extra", depth + 1
            )
        return result

    def _array(self, schema: dict[str, Any], name: str, depth: int) -> list[Any]:
        prefix = schema.get("prefixItems") or []
        items = schema.get("items", {})
        if isinstance(items, list):  # draft-07 tuple form
            prefix, items = items, schema.get("additionalItems", {})
        low = schema.get("minItems", 0)
        high = schema.get("maxItems", max(low, 1))
        count = max(low, min(1, high), min(len(prefix), high))
        values = []
        for position in range(count):
            sub = prefix[position] if position < len(prefix) else items
            values.append(self.sample(sub, position, name, depth + 1))
        contains = schema.get("contains")
        if isinstance(contains, dict) and values:
            values[0] = self.sample(contains, 0, name, depth + 1)
        return values

    @staticmethod
    def _number(schema: dict[str, Any], variant: int, *, integer: bool) -> int | float:
        """The ``variant``-th valid value on the grid of ``multipleOf`` (or of 1), walking
        outwards from 1 clamped into the bounds (cycling when the bounds hold fewer); the
        midpoint when the bounds are narrower than the grid."""
        low, high = _bounds(schema)
        step = schema.get("multipleOf")
        unit = _grid_unit(step, integer)
        anchor = 1.0
        if low is not None:
            anchor = max(anchor, low[0])
        if high is not None:
            anchor = min(anchor, high[0])
        first = math.ceil(anchor / unit)
        valid: list[float] = []
        for distance in range(_GRID_SEARCH):
            for k in sorted({first + distance, first - distance}, reverse=True):
                value = k * unit
                if _within(value, low, high) and _multiple(value, step):
                    valid.append(value)
            if len(valid) > variant:
                break
        if valid:
            value = valid[variant % len(valid)]
            return int(value) if integer or float(value).is_integer() else value
        if low is not None and high is not None and not integer:
            return (low[0] + high[0]) / 2
        return int(anchor) if integer else anchor

    @staticmethod
    def _string(schema: dict[str, Any], variant: int, name: str) -> str:
        low = schema.get("minLength", 0)
        high = schema.get("maxLength")
        if schema.get("format") in _FORMATS:
            return _FORMATS[schema["format"]]
        if isinstance(schema.get("pattern"), str):
            return _pattern_string(schema["pattern"], low, high, variant)
        suffix = str(variant) if variant else ""
        text = (re.sub(r"[^a-z0-9_]", "", name.lower()) or "example") + suffix
        if high is not None and len(text) > high:
            text = (text[: max(high - len(suffix), 0)] + suffix)[-high:] if high else ""
        return text.ljust(low, "x")


def _merge(base: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    merged = {**base, **extra}
    if "properties" in base and "properties" in extra:
        merged["properties"] = {**base["properties"], **extra["properties"]}
    if "required" in base and "required" in extra:
        merged["required"] = list(dict.fromkeys([*base["required"], *extra["required"]]))
    return merged


Bound = tuple[float, bool]  # (value, exclusive)


def _bounds(schema: dict[str, Any]) -> tuple[Bound | None, Bound | None]:
    """Lower and upper bound as (value, exclusive), for both the draft-04 boolean form of
    ``exclusiveMinimum`` and the numeric form of later drafts; the stricter one wins."""
    low: Bound | None = None
    high: Bound | None = None
    if "minimum" in schema:
        low = (schema["minimum"], schema.get("exclusiveMinimum") is True)
    if "maximum" in schema:
        high = (schema["maximum"], schema.get("exclusiveMaximum") is True)
    exclusive_low = _number_or_none(schema.get("exclusiveMinimum"))
    if exclusive_low is not None and (low is None or exclusive_low >= low[0]):
        low = (exclusive_low, True)
    exclusive_high = _number_or_none(schema.get("exclusiveMaximum"))
    if exclusive_high is not None and (high is None or exclusive_high <= high[0]):
        high = (exclusive_high, True)
    return low, high


def _number_or_none(value: Any) -> float | None:
    """The numeric (draft 6+) form of an exclusive bound; booleans are the draft-04 form."""
    return value if isinstance(value, int | float) and not isinstance(value, bool) else None


def _within(value: float, low: Bound | None, high: Bound | None) -> bool:
    if low is not None and (value < low[0] or (low[1] and value == low[0])):
        return False
    return not (high is not None and (value > high[0] or (high[1] and value == high[0])))


def _multiple(value: float, step: float | None) -> bool:
    """The same test jsonschema applies (float division for float steps)."""
    if not step:
        return True
    if isinstance(step, float):
        quotient = value / step
        return math.isfinite(quotient) and int(quotient) == quotient
    return float(value).is_integer() and int(value) % step == 0


def _grid_unit(step: float | None, integer: bool) -> float:
    """Spacing of candidate values: the step, scaled up to a whole number for integers that
    must be multiples of a fraction (0.5 → 1)."""
    if not step:
        return 1
    if integer and not float(step).is_integer():
        for n in range(2, 1001):
            if float(step * n).is_integer():
                return step * n
    return step


def _pattern_string(pattern: str, low: int, high: int | None, variant: int) -> str:
    fallback = ""
    for stretch in range(0, 8):
        text = regex_sample(pattern, stretch + variant)
        fallback = fallback or text
        for candidate in (text, text.ljust(low, "a")):
            fits = len(candidate) >= low and (high is None or len(candidate) <= high)
            if fits and re.search(pattern, candidate):
                return candidate
    return fallback


def sample_schema(schema: dict[str, Any]) -> Any:
    """An instance of ``schema`` (deterministic: same schema, same value)."""
    return SchemaSampler(schema).sample(schema)
