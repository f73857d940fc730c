"""The second opinion on a model's plan: the utility model reviews the decomposition.

The rule checks (``longhaul.agent.planning.quality``) see form — descriptions, criteria, known
presets and tools. Whether the phases cover the goal, whether independent work was chained
that could run in parallel, whether a phase is redundant, only a reader of the goal can say:
the utility model answers ``{"ok", "problems"}`` and its problems go back to the planner
model once, like the rule problems. An offline or failing checker approves (rules suffice).
"""

from __future__ import annotations

import json
import logging
from typing import Any

from longhaul.agent.planning.schema import phases_to_json
from longhaul.domain.events import PhaseSpec
from longhaul.llm.structured import complete_json
from longhaul.llm.types import Model, ModelError
from longhaul.planner.models import CALL_TIMEOUT_S

log = logging.getLogger(__name__)

SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["ok", "problems"],
    "properties": {
        "ok": {"type": "boolean"},
        "problems": {
            "type": "array",
            "items": {"type": "string", "minLength": 1, "maxLength": 500},
            "maxItems": 8,
        },
    },
    "additionalProperties": False,
}

SYSTEM = """You review a plan that splits a goal into phases run by separate agents.
Check only substance: does doing every phase achieve the whole goal; are phases that do not
need each other's results left independent (they run in parallel); is any phase redundant
or too vague to act on. Answer {"ok": true, "problems": []} for a good plan, else
{"ok": false, "problems": ["<what to change>", ...]}. JSON only."""


async def review(goal: str, specs: list[PhaseSpec], checker: Model | None) -> list[str]:
    """The checker's problems with the plan; empty when it approves or cannot answer."""
    if checker is None:
        return []
    plan = json.dumps(phases_to_json(specs), ensure_ascii=False, indent=1)
    try:
        value, _ = await complete_json(
            checker,
            [{"role": "user", "content": f"Goal:\n{goal}\n\nPlan:\n{plan}"}],
            SCHEMA,
            system=SYSTEM,
            timeout_s=CALL_TIMEOUT_S,
        )
    except (ModelError, TimeoutError) as exc:
        log.warning("plan check unavailable, keeping the plan: %s", exc or "timeout")
        return []
    problems = [str(p) for p in value["problems"]]
    if value["ok"] and not problems:
        return []
    return [f"reviewer: {p}" for p in problems] or ["reviewer: the plan does not serve the goal"]
