"""The rule-based plan, used when the planner model is offline or gives no usable plan.

The goal's verbs pick phases from four templates — search, analyse, build, write — kept in
that order and chained, so each phase gets the previous one's result. A goal with none of the
known verbs gets search → analyse → write, the shape most open-ended tasks have.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from longhaul.domain.events import PhaseSpec


@dataclass(frozen=True)
class Template:
    id: str
    name: str
    verbs: frozenset[str]
    preset: str
    instruction: str
    criteria: tuple[str, ...]


TEMPLATES = (
    Template(
        "search",
        "Search and gather sources",
        frozenset(
            {
                "research",
                "search",
                "find",
                "look",
                "investigate",
                "gather",
                "collect",
                "explore",
                "survey",
                "discover",
                "browse",
                "fetch",
                "scrape",
                "read",
                "learn",
                "identify",
                "list",
            }
        ),
        "explore",
        "Find and collect the information, sources and facts needed for the goal. Record "
        "where each finding comes from.",
        ("lists the relevant findings with their sources",),
    ),
    Template(
        "analyse",
        "Analyse the findings",
        frozenset(
            {
                "analyse",
                "analyze",
                "analysis",
                "compare",
                "evaluate",
                "assess",
                "review",
                "examine",
                "study",
                "audit",
                "benchmark",
                "measure",
                "diagnose",
                "rank",
                "understand",
                "check",
                "verify",
                "test",
                "debug",
            }
        ),
        "analyst",
        "Analyse what is known so far: compare, weigh the evidence, and draw conclusions "
        "that serve the goal. State assumptions explicitly.",
        ("states conclusions that follow from the evidence", "names open questions"),
    ),
    Template(
        "build",
        "Build the solution",
        frozenset(
            {
                "implement",
                "build",
                "code",
                "develop",
                "fix",
                "refactor",
                "program",
                "deploy",
                "migrate",
                "configure",
                "install",
                "automate",
                "port",
                "add",
                "update",
                "optimise",
                "optimize",
                "make",
            }
        ),
        "default",
        "Carry out the changes the goal asks for, check that they work, and report what "
        "was changed and how it was checked.",
        ("the requested change is made and checked",),
    ),
    Template(
        "write",
        "Write the result",
        frozenset(
            {
                "write",
                "draft",
                "report",
                "summarise",
                "summarize",
                "document",
                "compose",
                "create",
                "produce",
                "prepare",
                "present",
                "explain",
                "describe",
                "publish",
                "outline",
                "translate",
                "plan",
            }
        ),
        "default",
        "Write the final deliverable for the goal from the earlier results: complete, "
        "well structured and ready to hand over.",
        ("the deliverable answers the goal completely",),
    ),
)
DEFAULT_IDS = ("search", "analyse", "write")
_WORD = re.compile(r"[a-z]+")


def rule_based_plan(goal: str) -> list[PhaseSpec]:
    words = set(_WORD.findall(goal.lower()))
    chosen = [t for t in TEMPLATES if t.verbs & words] or [
        t for t in TEMPLATES if t.id in DEFAULT_IDS
    ]
    specs: list[PhaseSpec] = []
    for template in chosen:
        specs.append(
            PhaseSpec(
                id=template.id,
                name=template.name,
                description=f"{template.instruction}\n\nGoal: {goal}",
                depends_on=[specs[-1].id] if specs else [],
                preset=template.preset,
                criteria=list(template.criteria),
            )
        )
    return specs
