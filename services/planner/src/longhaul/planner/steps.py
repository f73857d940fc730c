"""Step traces: the trace aggregates that run a task's phases.

The planner only talks to them through events: it appends ``trace_created`` (with the task
and phase, preset, tools, verification and the phase brief) and later reads their final
events (see ``outcomes``). Step trace ids are derived from (task, plan round, phase, attempt,
competitor), so creating one twice — a retry, a redelivery, two planner replicas — lands on
the same aggregate, and the optimistic-concurrency append makes the second creation a no-op.
"""

from __future__ import annotations

import hashlib
from typing import Any

from longhaul.core.repository import Repository
from longhaul.domain import events as ev
from longhaul.domain.events import PhaseSpec, TraceConfig
from longhaul.domain.state import TaskState, TraceState
from longhaul.planner.context import phase_brief

WORKSPACE_TOOL = "workspace_read"


def step_trace_id(task_id: str, plan_round: int, phase_id: str, attempt: int, index: int) -> str:
    digest = hashlib.sha256(
        f"{task_id}|{plan_round}|{phase_id}|{attempt}|{index}".encode()
    ).hexdigest()
    return f"st_{digest[:24]}"


def competitors(spec: PhaseSpec) -> list[dict[str, Any]]:
    """Who runs the phase: its competitors, or the phase itself as the only one."""
    return spec.competitors or [{"preset": spec.preset, "model": spec.model}]


def step_trace_ids(task: TaskState, spec: PhaseSpec, attempt: int) -> list[str]:
    plan_round = len(task.replans)
    return [
        step_trace_id(task.task_id, plan_round, spec.id, attempt, index)
        for index in range(len(competitors(spec)))
    ]


Budget = tuple[int | None, float | None]
"""What a step trace may use (``max_tokens``, ``max_cost``): what is left of the task's caps."""


def step_config(
    task: TaskState, spec: PhaseSpec, competitor: dict[str, Any], budget: Budget = (None, None)
) -> TraceConfig:
    tools = spec.tools
    if tools is not None and spec.depends_on and WORKSPACE_TOOL not in tools:
        tools = [*tools, WORKSPACE_TOOL]
    verification = spec.verification
    if verification and verification.get("judge") is True and "criteria" not in verification:
        verification = {**verification, "criteria": spec.criteria}
    options = task.options
    return TraceConfig(
        model=competitor.get("model") or spec.model or _str(options.get("model")),
        preset=competitor.get("preset") or spec.preset,
        tools=tools,
        verification=verification,
        working_dir=_str(options.get("working_dir")),
        max_tokens=budget[0],
        max_cost=budget[1],
        messaging=options.get("messaging") is True,
    )


def _str(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


def step_trace_created(
    task: TaskState, spec: PhaseSpec, index: int, budget: Budget = (None, None)
) -> ev.TraceCreated:
    competitor = competitors(spec)[index]
    label = competitor.get("name") or competitor.get("model") or competitor.get("preset")
    name = f"{spec.name}" + (f" [{label}]" if spec.competitors else "")
    return ev.TraceCreated(
        messages=[ev.InputMessage(role="user", content=phase_brief(task, spec))],
        config=step_config(task, spec, competitor, budget),
        name=name,
        owner=task.owner,
        task_id=task.task_id,
        phase_id=spec.id,
    )


async def ensure_step_trace(
    traces: Repository[TraceState], trace_id: str, created: ev.TraceCreated
) -> bool:
    """Create the trace unless it exists; True if this call created it."""
    return await traces.create(trace_id, created, actor="planner") is not None
