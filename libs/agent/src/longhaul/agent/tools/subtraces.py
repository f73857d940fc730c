"""``agent`` and ``evaluate``: tools whose work is done by child traces.

These tools never run a child. They record one ``SubtraceSpawned`` per child (ids from
``new_id("t")``) and answer :class:`Deferred`; the executor creates the children, the parent
waits, and when every child finished the engine appends the summaries as this call's result.
"""

from __future__ import annotations

from typing import Literal

from longhaul.agent.errors import ToolError
from longhaul.agent.tools.base import tool
from longhaul.agent.tools.context import ToolContext
from longhaul.agent.tools.result import Deferred
from longhaul.domain.events import InputMessage, SubtraceSpawned
from longhaul.domain.ids import new_id
from pydantic import BaseModel, ConfigDict

MAX_SEED_MESSAGES = 50


class SeedMessage(BaseModel):
    """One message of the conversation a sub-agent starts from."""

    model_config = ConfigDict(extra="forbid")

    role: Literal["user", "assistant"]
    content: str


def _seeds(messages: list[SeedMessage] | None) -> list[InputMessage]:
    if messages is not None and len(messages) > MAX_SEED_MESSAGES:
        raise ToolError(
            f"messages: at most {MAX_SEED_MESSAGES} per sub-agent", code="tool_call_invalid"
        )
    return [InputMessage(role=m.role, content=m.content) for m in messages or ()]


def _per_child(
    messages: list[SeedMessage] | list[list[SeedMessage]] | None, count: int
) -> list[list[InputMessage]]:
    """``messages`` for ``count`` children: one list every child shares, or one per child."""
    if not messages or isinstance(messages[0], SeedMessage):
        shared = _seeds(messages)  # type: ignore[arg-type]
        return [shared] * count
    if len(messages) != count:
        raise ToolError(
            f"messages: {len(messages)} lists for {count} tasks (give one list per task, "
            "or one list for all)",
            code="tool_call_invalid",
        )
    return [_seeds(item) for item in messages]


def _spawn(
    ctx: ToolContext,
    *,
    mode: Literal["delegate", "explore", "evaluate"],
    task: str,
    preset: str,
    continue_from: str | None = None,
    skills: list[str] | None = None,
    remote: str | None = None,
    messages: list[InputMessage] | None = None,
    context: str | None = None,
) -> str:
    child = continue_from or new_id("t")
    ctx.record(
        SubtraceSpawned(
            child_trace_id=child,
            tool_call_id=ctx.tool_call_id,
            mode=mode,
            task=task,
            preset=preset,
            continue_from=continue_from,
            skills=skills or [],
            remote=remote,
            messages=messages or [],
            context=context or None,
        )
    )
    return child


def _check_limits(ctx: ToolContext, new: int) -> None:
    """Refuse ``new`` sub-traces beyond the depth or descendant limit (both on the log: the
    trace's ``depth`` and its share of the root's limit, set when it was created)."""
    state, settings = ctx.state, ctx.settings
    if state.depth >= settings.max_delegation_depth:
        raise ToolError(
            f"delegation refused: this trace is already {state.depth} level(s) below its root "
            f"and sub-agents nest at most {settings.max_delegation_depth} deep; do the work "
            "yourself",
            code="delegation_limit",
        )
    allowed = settings.max_descendants if state.max_descendants is None else state.max_descendants
    if state.descendants + new > allowed:
        left = max(allowed - state.descendants, 0)
        raise ToolError(
            f"delegation refused: {new} more sub-agent(s) would exceed the limit of "
            f"{settings.max_descendants} sub-traces per root ({left} left here); do the work "
            "yourself or with fewer sub-agents",
            code="delegation_limit",
        )


def _remote(ctx: ToolContext, agent_url: str) -> str:
    """The configured remote ``agent_url`` names (by name or URL); anything else is refused:
    the executor is no open relay."""
    configured = ctx.settings.remote_agents
    for name, url in configured.items():
        if agent_url in (name, url, url.rstrip("/")):
            return name
    raise ToolError(
        f"agent_url {agent_url!r} is not a configured remote agent (configured: "
        f"{', '.join(configured) or 'none'}); only those can be delegated to",
        code="remote_not_configured",
    )


def _continued(ctx: ToolContext, child: str) -> str:
    """The sub-trace key ``continue_from`` names: a local id, or a remote child's
    ``agent://host:port/<id>``."""
    for key, info in ctx.state.subtraces.items():
        if info.remote_id == child:
            return key
    return child


def _continuable(ctx: ToolContext, child: str) -> None:
    info = ctx.state.subtraces.get(child)
    if info is None:
        known = ", ".join(ctx.state.subtraces) or "none"
        raise ToolError(
            f"continue_from: {child} is not a sub-trace of this trace (known: {known})",
            code="tool_call_invalid",
        )
    if info.status == "running":
        raise ToolError(f"continue_from: {child} is still running", code="tool_call_invalid")


@tool(effects="idempotent")  # the child's id is derived from the call: started once
async def agent(
    ctx: ToolContext,
    mode: Literal["delegate", "explore"] = "delegate",
    task: str | None = None,
    tasks: list[str] | None = None,
    preset: str | None = None,
    continue_from: str | None = None,
    skills: list[str] | None = None,
    agent_url: str | None = None,
    messages: list[SeedMessage] | list[list[SeedMessage]] | None = None,
    context: str | None = None,
) -> Deferred:
    """Hand work to sub-agents and wait for their summaries.

    Args:
        mode: delegate (one sub-agent with full tools does ``task``) or explore (one
            read-only sub-agent per entry of ``tasks``, all in parallel).
        task: the delegated task, self-contained (the sub-agent does not see this conversation).
        tasks: explore mode: independent questions to investigate.
        preset: preset of a delegated sub-agent (default: default).
        continue_from: id of a finished sub-trace to continue with ``task`` instead of
            starting a new one.
        skills: skills the sub-agent(s) get, by name (default: their preset's, else all).
        agent_url: delegate mode: a configured remote longhaul (its name or URL) runs the
            sub-agent; its id is then ``agent://host:port/<id>``.
        messages: a conversation the sub-agent starts from, before its task (user and
            assistant turns); explore mode: one list for all, or one list per task.
        context: background the sub-agent gets with its task (facts, constraints, where
            things are).
    """
    if mode == "delegate":
        if not task:
            raise ToolError("delegate needs a task", code="schema_mismatch")
        remote = _remote(ctx, agent_url) if agent_url else None
        [seeds] = _per_child(messages, 1)
        if continue_from:
            continue_from = _continued(ctx, continue_from)
            _continuable(ctx, continue_from)
            remote = ctx.state.subtraces[continue_from].remote
        else:
            _check_limits(ctx, 1)
        child = _spawn(
            ctx,
            mode="delegate",
            task=task,
            preset=preset or "default",
            continue_from=continue_from,
            skills=skills,
            remote=remote,
            messages=seeds,
            context=context,
        )
        return Deferred("subtraces", detail=child)
    if agent_url:
        raise ToolError("agent_url works with mode delegate", code="tool_call_invalid")
    if not tasks:
        raise ToolError("explore needs a non-empty tasks list", code="schema_mismatch")
    limit = ctx.settings.max_explore_tasks
    if len(tasks) > limit:
        raise ToolError(f"explore takes at most {limit} tasks", code="tool_call_invalid")
    _check_limits(ctx, len(tasks))
    seeded = _per_child(messages, len(tasks))
    children = [
        _spawn(
            ctx,
            mode="explore",
            task=item,
            preset="explore",
            skills=skills,
            messages=seeds,
            context=context,
        )
        for item, seeds in zip(tasks, seeded, strict=True)
    ]
    return Deferred("subtraces", detail=", ".join(children))


def _goal_target(
    ctx: ToolContext, goal_id: str, subject: str | None, criteria: list[str] | None
) -> tuple[str, list[str]]:
    """The subject and criteria ``evaluate(target_goal_id=…)`` judges, from the goal tree:
    the goal's title, reason and reported result; the goal's criteria, then the call's."""
    goal = ctx.state.goals.goals.get(goal_id)
    if goal is None:
        known = ", ".join(ctx.state.goals.order) or "none"
        raise ToolError(f"unknown goal {goal_id!r}; known: {known}", code="tool_call_invalid")
    lines = [f"Goal {goal.id}: {goal.title} ({goal.status})"]
    if goal.reason:
        lines.append(f"Why: {goal.reason}")
    if goal.summary:
        lines.append(f"Reported result: {goal.summary}")
    if subject:
        lines.append(subject)
    checks = [*goal.criteria, *(criteria or ())] or [f"the goal is achieved: {goal.title}"]
    return "\n".join(lines), checks


@tool(effects="idempotent")  # likewise
async def evaluate(
    ctx: ToolContext,
    subject: str | None = None,
    criteria: list[str] | None = None,
    continue_from: str | None = None,
    target_goal_id: str | None = None,
) -> Deferred:
    """Have an independent evaluator sub-agent judge work against explicit criteria.

    Args:
        subject: what to evaluate: an answer, or where the work is (files, workspace keys).
        criteria: the checks the work must pass.
        continue_from: id of a finished evaluation to continue instead of starting a new one.
        target_goal_id: a goal of your plan to judge: its description, criteria and result
            are read from the goal tree (``subject`` / ``criteria`` add to them). Without it
            and without ``subject``: the goal in focus.
    """
    if not subject and not target_goal_id:
        target_goal_id = ctx.state.goals.focus
    if target_goal_id:
        subject, criteria = _goal_target(ctx, target_goal_id, subject, criteria)
    if not subject or not criteria:
        raise ToolError(
            "evaluate needs subject and criteria, or target_goal_id", code="schema_mismatch"
        )
    if continue_from:
        _continuable(ctx, continue_from)
    else:
        _check_limits(ctx, 1)
    checklist = "\n".join(f"- {item}" for item in criteria)
    task = (
        f"Evaluate the following against each criterion; report pass/fail per criterion "
        f"with evidence.\n\nSubject:\n{subject}\n\nCriteria:\n{checklist}"
    )
    child = _spawn(ctx, mode="evaluate", task=task, preset="analyst", continue_from=continue_from)
    return Deferred("subtraces", detail=child)
