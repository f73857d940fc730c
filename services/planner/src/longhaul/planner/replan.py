"""After a failed phase: a reflection on why it failed, then a new plan for what is left.

Completed phases are always kept (their results stay where they are); the new phases may
depend on them. With a usable planner model the reflection and the replan are two turns of
one conversation; otherwise — or when the model's plan is unusable — the rule-based replan
re-issues every unfinished phase with the reflection added to its description.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Collection
from dataclasses import dataclass

import msgspec
from longhaul.agent.planning.quality import plan_issues
from longhaul.agent.planning.schema import InvalidPlan, parse_phases, phases_to_json, plan_schema
from longhaul.domain.events import PhaseSpec
from longhaul.domain.state import TaskState
from longhaul.llm.structured import complete_json
from longhaul.llm.telemetry import traced_complete
from longhaul.llm.types import ChatMessage, Model, ModelError, ModelRequest
from longhaul.planner.models import CALL_TIMEOUT_S

log = logging.getLogger(__name__)

REFLECTION_LIMIT = 2000
EARLIER_FAILURE = "\n\nAn earlier attempt at this failed. Reflection:\n"
SINGLE_AGENT_ID = "single-agent"


@dataclass(frozen=True)
class FailureReport:
    phase_id: str
    name: str
    error: str
    transcript_tail: str = ""


@dataclass(frozen=True)
class Replan:
    phases: list[PhaseSpec]
    kept: list[str]
    source: str


def completed_ids(task: TaskState) -> list[str]:
    return [pid for pid in task.order if task.phases[pid].status == "completed"]


def _failure_text(reports: list[FailureReport]) -> str:
    return "\n\n".join(
        f"Phase {r.phase_id} ({r.name}) failed: {r.error or 'no error given'}"
        + (f"\nEnd of its transcript:\n{r.transcript_tail}" if r.transcript_tail else "")
        for r in reports
    )


def _reflect_prompt(task: TaskState, reports: list[FailureReport]) -> str:
    plan = json.dumps(phases_to_json([task.phases[pid].spec for pid in task.order]), indent=1)
    return (
        f"Task goal:\n{task.goal}\n\nPlan:\n{plan}\n\n{_failure_text(reports)}\n\n"
        "Reflect briefly: why did it fail, and what must the next attempt do differently?"
    )


def rule_reflection(task: TaskState, reports: list[FailureReport]) -> str:
    kept = completed_ids(task)
    return (
        "; ".join(
            f"phase {r.phase_id} ({r.name}) failed: {r.error or 'no error given'}" for r in reports
        )
        + f". Keeping completed phases: {', '.join(kept) or 'none'}."
    )[:REFLECTION_LIMIT]


async def reflect(
    task: TaskState, reports: list[FailureReport], model: Model | None
) -> tuple[str, list[ChatMessage]]:
    """The reflection, and the conversation so far (the replan continues it)."""
    conversation: list[ChatMessage] = [{"role": "user", "content": _reflect_prompt(task, reports)}]
    if model is not None:
        request = ModelRequest(model=model.name, messages=conversation)
        try:
            response = await asyncio.wait_for(
                traced_complete(model, request), timeout=CALL_TIMEOUT_S
            )
            if response.content.strip():
                text = response.content.strip()[:REFLECTION_LIMIT]
                return text, [*conversation, {"role": "assistant", "content": text}]
        except (ModelError, TimeoutError) as exc:
            log.warning("reflection on task %s failed: %s", task.task_id, exc)
    text = rule_reflection(task, reports)
    return text, [*conversation, {"role": "assistant", "content": text}]


def rule_replan(task: TaskState, reflection: str) -> Replan:
    kept = completed_ids(task)
    phases = []
    for pid in task.order:
        spec = task.phases[pid].spec
        if pid in kept:
            continue
        original = spec.description.split(EARLIER_FAILURE, 1)[0]
        phases.append(
            msgspec.structs.replace(spec, description=f"{original}{EARLIER_FAILURE}{reflection}")
        )
    return Replan(phases, kept, "rules")


async def replan(
    task: TaskState,
    reflection: str,
    conversation: list[ChatMessage],
    model: Model | None,
    *,
    max_phases: int,
    presets: Collection[str],
    tools: Collection[str],
) -> Replan:
    if model is None:
        return rule_replan(task, reflection)
    kept = completed_ids(task)
    kept_specs = [task.phases[pid].spec for pid in kept]
    summaries = "\n".join(f"- {pid}: {task.phases[pid].summary}" for pid in kept) or "none"
    prompt = (
        f"Completed phases (kept; their results stay available):\n{summaries}\n\n"
        "Plan the remaining work as new phases. They may depend on the completed phases' "
        f"ids; do not reuse those ids. Together with the kept phases stay within {max_phases}."
    )
    messages = [*conversation, {"role": "user", "content": prompt}]
    schema = plan_schema(max(1, max_phases - len(kept)))
    try:
        value, _ = await complete_json(model, messages, schema, timeout_s=CALL_TIMEOUT_S)
        phases = parse_phases(value["phases"], max_phases=max_phases, kept=kept_specs)
        issues = plan_issues(phases, task.goal, presets=presets, tools=tools)
        if issues:
            raise InvalidPlan("; ".join(issues))
    except (ModelError, TimeoutError, InvalidPlan) as exc:
        log.warning("model replan of task %s unusable, using rules: %s", task.task_id, exc)
        return rule_replan(task, reflection)
    return Replan(phases, kept, "model")


def single_agent_phase(task: TaskState, reflection: str) -> PhaseSpec:
    """The fallback when replanning is exhausted: one agent does the rest of the goal, with
    the completed phases' results as its inputs."""
    return PhaseSpec(
        id=SINGLE_AGENT_ID,
        name="Single agent",
        description=(
            "Complete the whole task goal yourself; the planned phases kept failing."
            f"{EARLIER_FAILURE}{reflection}"
        ),
        depends_on=completed_ids(task),
        criteria=["the result answers the task goal completely"],
    )
