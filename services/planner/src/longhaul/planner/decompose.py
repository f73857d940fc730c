"""Turn a task's goal into phases.

An explicit ``options["phases"]`` list is validated and used as is. Otherwise the planner
model answers with a JSON-schema-constrained plan, which must also pass the graph validation
and the quality self-check — the rules first, then (``pipeline.plan_model_check``) the utility
model's review of the substance (``plan_check``); problems go back to the model once as the
next turn of the same conversation. The prompt shows a worked example of a good plan
(``pipeline.plan_worked_example``). When the model is offline, fails, or stays wrong, the
rule-based plan is used.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

from longhaul.agent.planning.quality import plan_issues
from longhaul.agent.planning.rules import rule_based_plan
from longhaul.agent.planning.schema import InvalidPlan, parse_phases, plan_schema
from longhaul.domain.events import PhaseSpec
from longhaul.llm.structured import complete_json
from longhaul.llm.types import ChatMessage, Model, ModelError
from longhaul.planner.models import CALL_TIMEOUT_S
from longhaul.planner.plan_check import review

log = logging.getLogger(__name__)

ROUNDS = 2

SYSTEM = """You are the planner of an autonomous agent platform. You decompose a goal into
phases. Each phase is run by one agent that sees only the phase's description, its
acceptance criteria and the results of the phases it depends on, so every description must
be self-contained and concrete. Use depends_on only when a phase needs another phase's
result: independent phases run in parallel. Give every phase checkable acceptance criteria.
Use short lowercase ids (letters, digits, - and _). Answer with JSON only."""


@dataclass(frozen=True)
class Decomposition:
    phases: list[PhaseSpec]
    source: str
    """``options`` (given with the task), ``model`` or ``rules``."""
    note: str = ""
    """Why the model's plan was not used, when it was not."""


COMPETE = """Competitive mode: where the quality of a phase's result matters most (analysis,
design, writing — not mechanical gathering), give that phase 2 or 3 "competitors", each
{"name", "preset"} or {"name", "model"}, differing in approach, and a "merge" strategy: "best"
(a judge picks one), "vote" (competitors score each other) or "fusion" (one result combining
all). Competitors cost a full run each: use them only where they pay off."""


EXAMPLE = """Example. Goal: "Compare PostgreSQL and SQLite for an embedded analytics product
and recommend one." A good plan: two independent gathering phases run in parallel, the
comparison needs both, the recommendation needs the comparison:
{"phases": [
 {"id": "gather-postgres", "name": "Gather: PostgreSQL", "description": "Collect PostgreSQL's
  embedding options, footprint, analytics features and licence, with sources.",
  "depends_on": [], "preset": "explore", "criteria": ["covers footprint, features and licence
  with a source for each"]},
 {"id": "gather-sqlite", "name": "Gather: SQLite", "description": "Collect the same facts for
  SQLite, with sources.", "depends_on": [], "preset": "explore", "criteria": ["covers the
  same points as the PostgreSQL phase"]},
 {"id": "compare", "name": "Compare", "description": "Compare both on the same criteria in a
  table and weigh them for embedded analytics.", "depends_on": ["gather-postgres",
  "gather-sqlite"], "preset": "analyst", "criteria": ["every criterion compared for both"]},
 {"id": "recommend", "name": "Recommend", "description": "Write the recommendation with its
  reasons and risks.", "depends_on": ["compare"], "criteria": ["names one choice and why"]}]}
(Only the shape is an example: plan for the goal you are given.)"""


def _prompt(
    goal: str,
    options: dict[str, Any],
    mode: str,
    max_phases: int,
    presets: Collection[str],
    tools: Collection[str],
    example: bool,
) -> str:
    context = options.get("context")
    fields = '"id", "name", "description", "depends_on", "preset", "tools", "criteria"'
    if mode == "compete":
        fields += ', "competitors", "merge"'
    return (
        f"Goal:\n{goal}\n\n"
        + (f"Context:\n{context}\n\n" if context else "")
        + f"Plan at most {max_phases} phases.\n"
        f"Presets (agent profiles) you may name: {', '.join(presets)}.\n"
        f"Tools you may require: {', '.join(tools)}.\n"
        + (f"{COMPETE}\n" if mode == "compete" else "")
        + (f"{EXAMPLE}\n" if example else "")
        + f'Answer as {{"phases": [{{{fields}}}]}}.'
    )


async def decompose(
    goal: str,
    options: dict[str, Any],
    *,
    mode: str = "plan",
    model: Model | None,
    max_phases: int,
    presets: Collection[str],
    tools: Collection[str],
    checker: Model | None = None,
    example: bool = True,
) -> Decomposition:
    """The plan for ``goal``; raises :class:`InvalidPlan` only for an invalid explicit plan."""
    if "phases" in options:
        return Decomposition(parse_phases(options["phases"], max_phases=max_phases), "options")
    if model is None:
        return Decomposition(rule_based_plan(goal), "rules", "planner model is offline")
    conversation: list[ChatMessage] = [
        {
            "role": "user",
            "content": _prompt(goal, options, mode, max_phases, presets, tools, example),
        }
    ]
    schema = plan_schema(max_phases)
    problems: list[str] = []
    for round_ in range(ROUNDS):
        try:
            value, _response = await complete_json(
                model, conversation, schema, system=SYSTEM, timeout_s=CALL_TIMEOUT_S
            )
        except (ModelError, TimeoutError) as exc:
            problems = [f"model call failed: {exc or 'timeout'}"]
            break
        try:
            specs = parse_phases(value["phases"], max_phases=max_phases)
            problems = plan_issues(specs, goal, presets=presets, tools=tools)
        except InvalidPlan as exc:
            problems = [str(exc)]
        if not problems and checker is not None and round_ < ROUNDS - 1:
            # One review per decomposition, while a round is left for its problems: the
            # reviewer can improve a plan that passes the rules, never discard it.
            problems = await review(goal, specs, checker)
            checker = None
        if not problems:
            return Decomposition(specs, "model")
        conversation += [
            {"role": "assistant", "content": json.dumps(value)},
            {
                "role": "user",
                "content": "The plan has problems:\n- "
                + "\n- ".join(problems)
                + "\nAnswer with the complete corrected plan.",
            },
        ]
    note = "; ".join(problems)
    log.warning("planner model gave no usable plan, using rules: %s", note)
    return Decomposition(rule_based_plan(goal), "rules", note)
