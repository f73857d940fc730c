"""The quality self-check of a model-made plan, beyond what the schema can say.

A plan that parses can still be a bad plan: phases without a real description or acceptance
criteria cannot be verified, duplicate names confuse the step agents, unknown presets or
tools would silently fall back to defaults, and a single phase that merely restates the goal
is no decomposition at all. The issues go back to the model once; a plan that still has them
is replaced by the rule-based one.
"""

from __future__ import annotations

from collections.abc import Collection

from longhaul.domain.events import PhaseSpec

MIN_DESCRIPTION_CHARS = 20


def plan_issues(
    specs: list[PhaseSpec],
    goal: str,
    *,
    presets: Collection[str],
    tools: Collection[str],
) -> list[str]:
    """Problems a reviewer would send back; empty when the plan is good enough to run."""
    issues: list[str] = []
    names = [spec.name.strip().lower() for spec in specs]
    duplicates = sorted({name for name in names if names.count(name) > 1})
    if duplicates:
        issues.append(f"phase names must differ: {', '.join(duplicates)} repeat")
    for spec in specs:
        where = f"phase {spec.id}"
        if len(spec.description.strip()) < MIN_DESCRIPTION_CHARS:
            issues.append(f"{where}: describe concretely what to do and what to produce")
        if not spec.criteria:
            issues.append(f"{where}: give at least one checkable acceptance criterion")
        for preset in {spec.preset, *(c.get("preset") for c in spec.competitors)} - {None}:
            if preset not in presets:
                issues.append(f"{where}: unknown preset {preset!r} (known: {', '.join(presets)})")
        unknown = sorted(set(spec.tools or []) - set(tools))
        if unknown:
            issues.append(f"{where}: unknown tools {', '.join(unknown)}")
    if len(specs) == 1 and specs[0].description.strip().lower() == goal.strip().lower():
        issues.append("the single phase only restates the goal; decompose it into steps")
    return issues
