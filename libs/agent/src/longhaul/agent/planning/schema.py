"""The JSON shape of a plan, for model answers and for ``TaskCreated.options["phases"]``.

Both go through the same jsonschema and graph validation (unique ids, known dependencies, no
cycle, at most ``max_phases``) before they become :class:`PhaseSpec` values, so a plan on the
log is always one the scheduler can run. Phase ids end up in workspace and checkpoint keys,
hence the conservative id pattern.
"""

from __future__ import annotations

from typing import Any

import msgspec
from longhaul.domain.events import PhaseSpec
from longhaul.domain.state import InvalidTransition, validate_phase_graph
from longhaul.domain.verification import verification_errors
from longhaul.llm.structured import schema_errors

PHASE_ID_PATTERN = "^[A-Za-z0-9][A-Za-z0-9_-]{0,47}$"
MERGE_STRATEGIES = ["best", "vote", "fusion", "first"]

COMPETITOR_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "minLength": 1, "maxLength": 64},
        "preset": {"type": "string", "minLength": 1},
        "model": {"type": "string", "minLength": 3},
    },
    "anyOf": [{"required": ["preset"]}, {"required": ["model"]}],
    "additionalProperties": False,
}

PHASE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["id", "name", "description"],
    "properties": {
        "id": {"type": "string", "pattern": PHASE_ID_PATTERN},
        "name": {"type": "string", "minLength": 1, "maxLength": 120},
        "description": {"type": "string", "minLength": 1},
        "depends_on": {"type": "array", "items": {"type": "string"}, "uniqueItems": True},
        "preset": {"type": "string", "minLength": 1},
        "tools": {"type": "array", "items": {"type": "string", "minLength": 1}},
        "criteria": {"type": "array", "items": {"type": "string", "minLength": 1}},
        "competitors": {"type": "array", "items": COMPETITOR_SCHEMA, "maxItems": 5},
        "merge": {"enum": MERGE_STRATEGIES},
        "verification": {"type": ["object", "null"]},
        "model": {"type": "string", "minLength": 3},
    },
    "additionalProperties": False,
}


def plan_schema(max_phases: int) -> dict[str, Any]:
    """The answer a planner model must give: ``{"phases": [...]}``."""
    return {
        "type": "object",
        "required": ["phases"],
        "properties": {
            "phases": {
                "type": "array",
                "items": PHASE_SCHEMA,
                "minItems": 1,
                "maxItems": max_phases,
            }
        },
    }


class InvalidPlan(ValueError):
    """A plan that cannot run; the message lists every problem found."""


def parse_phases(
    raw: Any, *, max_phases: int, kept: list[PhaseSpec] | None = None
) -> list[PhaseSpec]:
    """Validate ``raw`` (a list of phase dicts) into specs. ``kept`` are phases of an earlier
    plan the new ones may depend on (a replan); kept and new together stay within
    ``max_phases``."""
    kept = kept or []
    errors = schema_errors({"phases": raw}, plan_schema(max(1, max_phases - len(kept))))
    if not errors:
        # Commands are the operator's: a phase (the client's or a planner model's) may only
        # name a configured check.
        errors = [
            f"phases/{index}/{error}"
            for index, item in enumerate(raw)
            for error in verification_errors(item.get("verification"))
        ]
    if errors:
        raise InvalidPlan("; ".join(errors))
    try:
        specs = [msgspec.convert(item, PhaseSpec) for item in raw]
    except msgspec.ValidationError as exc:
        raise InvalidPlan(str(exc)) from exc
    try:
        validate_phase_graph([*kept, *specs], max_phases=max_phases)
    except InvalidTransition as exc:
        raise InvalidPlan(str(exc)) from exc
    return specs


def phases_to_json(specs: list[PhaseSpec]) -> list[dict[str, Any]]:
    """Specs as plain dicts (for prompts that show a plan to a model)."""
    return [msgspec.to_builtins(spec) for spec in specs]
