"""The cost-aware router behind ``POST /api/runs``: how complex is a goal, and so what runs it.

A planned team costs several full runs, so only a goal estimated above ``team_above`` (0.7)
becomes a task; from ``skill_above`` (0.3) one agent with its skills runs it, below that a
plain ReAct loop (both are a trace; the tier is recorded). The utility model estimates the
complexity with a one-line reason; when it is offline, fails or times out, rules do: a
comparison of several subjects, how many distinct kinds of work the goal names (in English or
Chinese, the rule decomposer's verbs), explicit sequencing and the goal's length.
"""

from __future__ import annotations

import re
from typing import Any, Literal

from longhaul.agent.planning.rules import compared_subjects, named_templates
from longhaul.domain.config import RoutingConfig
from longhaul.domain.events import RouteDecision
from longhaul.llm.structured import complete_json
from longhaul.llm.types import Model, ModelError

ESTIMATE_TIMEOUT_S = 20.0
Tier = Literal["react", "skill", "team"]

SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["complexity", "reason"],
    "properties": {
        "complexity": {"type": "number", "minimum": 0, "maximum": 1},
        "reason": {"type": "string", "minLength": 1, "maxLength": 300},
    },
    "additionalProperties": False,
}

SYSTEM = """You estimate how complex a goal is for an autonomous agent platform, from 0 to 1.
Below 0.3: one short agent loop answers it (a question, a lookup, one small change).
0.3 to 0.7: one agent working for a while (several tool calls, one kind of work).
Above 0.7: it needs a team: several distinct kinds of work, several subjects to research in
parallel, or a deliverable built from independent parts. Answer with JSON only:
{"complexity": <number>, "reason": "<one sentence>"}."""

_STEPS = re.compile(
    r"\b(?:then|afterwards|after that|finally|next)\b|然后|之后|接着|最后|再"
    r"|^\s*(?:\d+[.)]|[-*])\s",
    re.IGNORECASE | re.MULTILINE,
)


def tier_of(complexity: float, config: RoutingConfig) -> Tier:
    if complexity > config.team_above:
        return "team"
    return "skill" if complexity >= config.skill_above else "react"


def rule_estimate(goal: str) -> tuple[float, str]:
    """Complexity from the goal's shape alone, with the signals that made it."""
    score = 0.1
    signals: list[str] = []
    subjects = compared_subjects(goal)
    if subjects:
        score += 0.65 + 0.1 * (len(subjects) - 2)
        signals.append(f"compares {len(subjects)} subjects ({', '.join(subjects)})")
    kinds = named_templates(goal)
    if len(kinds) > 1:
        score += 0.2 * (len(kinds) - 1)
        signals.append(f"{len(kinds)} kinds of work ({', '.join(kinds)})")
    steps = len(_STEPS.findall(goal))
    if steps:
        score += min(0.3, 0.1 * steps)
        signals.append(f"{steps} sequencing markers")
    if len(goal) > 300:
        score += 0.2 if len(goal) > 1000 else 0.1
        signals.append(f"{len(goal)} characters long")
    reason = "; ".join(signals) or "a single, short request"
    return round(min(score, 1.0), 2), reason


async def estimate(
    goal: str, model: Model | None, config: RoutingConfig
) -> tuple[float, str, Literal["model", "rules"]]:
    """(complexity, reason, source): the utility model's estimate, else the rules'."""
    note = "utility model offline"
    if model is not None and config.use_model:
        try:
            value, _ = await complete_json(
                model,
                [{"role": "user", "content": f"Goal:\n{goal}"}],
                SCHEMA,
                system=SYSTEM,
                timeout_s=ESTIMATE_TIMEOUT_S,
                max_tokens=200,
            )
            return round(float(value["complexity"]), 2), str(value["reason"]), "model"
        except (ModelError, TimeoutError) as exc:
            note = f"utility model failed ({exc or 'timeout'})"
    elif not config.use_model:
        note = "model estimate switched off"
    complexity, reason = rule_estimate(goal)
    return complexity, f"{reason} [rules: {note}]", "rules"


async def route(
    goal: str,
    mode: Literal["auto", "trace", "task"],
    model: Model | None,
    config: RoutingConfig,
) -> tuple[Literal["trace", "task"], RouteDecision]:
    """What runs the goal, and the decision to record with it. A client that names the kind
    (``mode`` trace/task) gets it; the rules' estimate is still recorded, no model is asked."""
    if mode == "auto":
        complexity, reason, source = await estimate(goal, model, config)
    else:
        complexity, reason = rule_estimate(goal)
        reason, source = f"{mode} asked for by the client; {reason}", "rules"
    tier = tier_of(complexity, config)
    kind: Literal["trace", "task"] = (
        mode if mode != "auto" else ("task" if tier == "team" else "trace")
    )
    decision = RouteDecision(
        complexity=complexity, tier=tier, reason=reason, source=source, mode=mode
    )
    return kind, decision
