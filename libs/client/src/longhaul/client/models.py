"""Typed answers of the gateway.

The gateway's own response models live in the service package, which brings FastAPI and the
NATS client along; a script that only calls the API should not install those. So these are
small pydantic models of the same shapes (field names checked against the gateway's
OpenAPI schemas by ``tests/unit/test_client_models.py``), declaring the fields a script
reads and keeping every other field the gateway sends (``extra="allow"``: ``trace.context``
still works), so a newer gateway never breaks an older client.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, TypeVar, overload

from pydantic import BaseModel, ConfigDict, Field

FINAL_STATUSES = frozenset({"completed", "failed", "stopped"})
PERSON_WAITS = frozenset({"human", "approval", "client_tools"})
"""Waits that only the client (a person, or the script itself) ends."""


def content_text(content: Any) -> str:
    """A message content as text: the string, or the text parts of a multi-part content
    joined (its JSON when it has none)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    parts = [part.get("text", "") if isinstance(part, dict) else str(part) for part in content]
    return "\n".join(p for p in parts if p) or json.dumps(content)


class Model(BaseModel):
    model_config = ConfigDict(extra="allow")


class TraceSettings(BaseModel):
    """A trace's settings, as ``create_trace(settings=…)`` sends them (``None``: the preset's,
    else the gateway's). The same fields as the gateway's ``TraceSettings``
    (``tests/unit/test_client_models.py`` checks them field for field); unknown names are
    refused here rather than by the gateway."""

    model_config = ConfigDict(extra="forbid")

    model: str | None = None
    model_fallback: list[str] | None = None
    preset: str | None = None
    tools: list[str] | None = None
    skills: list[str] | None = None
    max_iterations: int | None = None
    max_tokens: int | None = None
    max_cost: float | None = None
    on_limit: str = "stop"
    """At max_tokens / max_cost: ``stop`` the run, or ``ask`` (a budget wait)."""
    temperature: float | None = None
    system_prompt: str | None = None
    model_params: dict[str, Any] | None = None
    """temperature, top_p, max_tokens (per response), seed, stop, tool_choice,
    parallel_tool_calls"""
    auto_execute_tools: bool = True
    approval: dict[str, Any] | None = None
    """{"tools": [names] or "*"}"""
    verification: dict[str, Any] | None = None
    """{"check": name} and/or {"json_schema": …} and/or {"criteria": […]}"""
    messaging: bool = False
    experiences: bool | None = None
    client_tools: list[dict[str, Any]] | None = None
    """[{"name", "description", "parameters": JSON schema}]: tools the client runs"""
    output_schema: dict[str, Any] | None = None
    """{"schema": JSON schema, "name"?, "strict"?}: the answer must be JSON matching it"""


class Info(Model):
    version: str
    owner: str
    default_model: str
    offline: bool
    notice: str | None = None
    auth: bool


class Accepted(Model):
    """The request is on the log; ``event_id`` is its stream sequence (follow from it)."""

    trace_id: str
    status: str
    event_id: int


class Erased(Model):
    """What a delete erased: the ids, the events, stored entries and objects removed, and
    ``working_dir``: removed, absent, shared (a sub-trace's or step trace's belongs to its
    root or task) or unreached (no executor answered)."""

    deleted: list[str]
    events: int
    entries: int
    objects: int
    working_dir: str


class Deleted(Erased):
    """A trace and its local sub-traces, erased."""

    trace_id: str


class TraceImported(Model):
    """An imported bundle: the new id of its root and of each of its traces (old → new)."""

    trace_id: str
    traces: dict[str, str]
    status: str | None = None


class KeyErased(Erased):
    """One API key's data, erased (``skipped``: its tasks still running, left)."""

    owner: str
    skipped: list[str]


class KeyHoldings(Model):
    """What one owner holds (``configured: false``: a revoked key's leftovers)."""

    owner: str
    configured: bool
    traces: int
    active_traces: int
    tasks: int
    schedules: int
    paused_schedules: int
    triggers: int


class KeyHoldingsList(Model):
    keys: list[KeyHoldings]


class MessageAccepted(Model):
    """The message is in the trace's inbox."""

    trace_id: str
    message_id: str
    event_id: int


class Route(Model):
    """Why ``POST /api/runs`` chose one agent or a team."""

    complexity: float
    tier: str
    reason: str
    source: str
    mode: str = "auto"


class RunAccepted(Model):
    """A goal routed to a trace (``trace_id``) or a task (``task_id``)."""

    kind: str
    trace_id: str | None = None
    task_id: str | None = None
    status: str
    route: Route
    event_id: int


class UploadedFile(Model):
    name: str
    size: int
    sha256: str


class FilesAccepted(Model):
    trace_id: str
    files: list[UploadedFile]
    event_id: int


class TaskAccepted(Model):
    task_id: str
    status: str
    event_id: int


class Totals(Model):
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    cost: float = 0.0
    duration_ms: int = 0

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


class WaitingBelow(Model):
    trace_id: str
    parent_trace_id: str | None = None
    name: str | None = None
    reason: str | None = None


class TraceSummary(Model):
    trace_id: str
    status: str
    name: str | None = None
    parent_trace_id: str | None = None
    task_id: str | None = None
    phase_id: str | None = None
    head_sequence: int = 0
    last_sequence: int = 0
    totals: Totals = Field(default_factory=Totals)
    error: str | None = None
    stop_reason: str | None = None
    wait_reason: str | None = None
    waiting_below: list[WaitingBelow] = Field(default_factory=list)
    created_at: float = 0.0
    updated_at: float = 0.0
    eval_id: str | None = None
    """The eval it is one run of."""

    @property
    def is_final(self) -> bool:
        return self.status in FINAL_STATUSES

    @property
    def needs_client(self) -> bool:
        """Waiting for something only the client gives: a reply, an approval, tool results."""
        return self.status == "waiting" and self.wait_reason in PERSON_WAITS


class PendingCall(Model):
    tool_call_id: str
    name: str
    arguments: str
    outcome_unknown: bool = False
    """Cut off by a crash while it acted: approve runs it again (same idempotency key), deny
    says it failed, ``approve(..., took_effect=True)`` says it happened."""


class CutOffEffect(Model):
    """A call with effects a crash cut off while it acted, and how it was resumed."""

    tool_call_id: str
    tool: str
    effects: str
    idempotency_key: str
    resolutions: list[str] = Field(default_factory=list)
    decision: str | None = None
    settled: bool = False


class Goal(Model):
    id: str
    title: str
    parent_id: str | None = None
    status: str
    summary: str | None = None


class GoalTree(Model):
    focus: str | None = None
    goals: list[Goal] = Field(default_factory=list)


class SubTrace(Model):
    trace_id: str
    status: str
    wait_reason: str | None = None
    mode: str
    task: str = ""
    summary: str = ""
    tool_call_id: str


class RunUsage(Model):
    iterations: int = 0
    tokens: int = 0
    cost: float = 0.0


class Budget(Model):
    max_iterations: int | None = None
    max_tokens: int | None = None
    max_cost: float | None = None


class EvalTag(Model):
    """The eval run a trace is one run of."""

    eval_id: str
    task: str
    repeat: int
    check: str | None = None


M = TypeVar("M", bound=BaseModel)

_FENCE = re.compile(r"```(?:json)?\s*\n(.*?)\n\s*```", re.DOTALL)


class Trace(TraceSummary):
    summary: str | None = None
    eval: EvalTag | None = None
    schedule_id: str | None = None
    trigger_id: str | None = None
    wait_detail: str = ""
    pending_approvals: list[PendingCall] = Field(default_factory=list)
    cut_off_effects: list[CutOffEffect] = Field(default_factory=list)
    pending_client_calls: list[PendingCall] = Field(default_factory=list)
    model: str | None = None
    preset: str = "default"
    runs: int = 0
    run_usage: RunUsage = Field(default_factory=RunUsage)
    budget: Budget = Field(default_factory=Budget)
    event_id: int
    goal_tree: GoalTree = Field(default_factory=GoalTree)
    sub_traces: list[SubTrace] = Field(default_factory=list)

    @overload
    def output(self, model: type[M]) -> M: ...

    @overload
    def output(self, model: None = None) -> Any: ...

    def output(self, model: type[M] | None = None) -> M | Any:
        """The final answer of a trace created with an ``output_schema``, parsed: the JSON
        value, or ``model`` validated from it. ``ValueError`` when the trace has no answer
        or it is not JSON (``pydantic.ValidationError`` when it does not fit ``model``)."""
        if self.status != "completed" or self.summary is None:
            raise ValueError(f"trace {self.trace_id} has no answer (status {self.status})")
        fenced = _FENCE.search(self.summary)
        text = self.summary.strip() if fenced is None else fenced.group(1)
        try:
            value = json.loads(text)
        except ValueError as exc:
            raise ValueError(f"the answer of trace {self.trace_id} is not JSON: {exc}") from exc
        return value if model is None else model.model_validate(value)


class TraceList(Model):
    traces: list[TraceSummary]
    next_cursor: str | None = None


class FunctionCall(Model):
    name: str
    arguments: str = "{}"


class ToolCall(Model):
    id: str
    type: str = "function"
    function: FunctionCall


class Message(Model):
    sequence: int
    parent_sequence: int | None = None
    role: str
    content: str | list[dict[str, Any]] | None = None
    tool_calls: list[ToolCall] | None = None
    tool_call_id: str | None = None
    goal_id: str | None = None
    created_at: float = 0.0

    @property
    def text(self) -> str:
        return content_text(self.content)


class Messages(Model):
    mode: str
    head_sequence: int
    messages: list[Message]


class Phase(Model):
    id: str
    name: str
    description: str = ""
    depends_on: list[str] = Field(default_factory=list)
    preset: str = "default"
    status: str
    trace_ids: list[str] = Field(default_factory=list)
    summary: str = ""
    output_ref: str = ""
    error: str = ""


class Task(Model):
    task_id: str
    status: str
    goal: str
    mode: str
    phases: list[Phase] = Field(default_factory=list)
    plan_source: str = ""
    max_tokens: int | None = None
    max_cost: float | None = None
    replans: list[str] = Field(default_factory=list)
    summary: str = ""
    error: str = ""
    created_at: float = 0.0
    updated_at: float = 0.0
    event_id: int = 0


class Checkpoint(Model):
    """A completed phase's saved result, from which a resume starts."""

    phase_id: str
    name: str
    summary: str = ""
    result_ref: str
    trace_id: str | None = None
    saved_at: float


class CheckpointList(Model):
    checkpoints: list[Checkpoint]


class TaskDeleted(Erased):
    """A task and its step traces, erased."""

    task_id: str


class CheckpointsCleared(Model):
    task_id: str
    cleared: int


class TaskSummary(Model):
    task_id: str
    status: str
    goal: str
    mode: str
    phases: int = 0
    phases_completed: int = 0
    error: str = ""
    created_at: float = 0.0
    updated_at: float = 0.0


class TaskList(Model):
    tasks: list[TaskSummary]
    next_cursor: str | None = None


class Experience(Model):
    """A lesson an agent recorded (reflection), kept per API key."""

    id: str
    trace_id: str | None = None
    category: str
    tags: dict[str, list[str]] = Field(default_factory=dict)
    metrics: dict[str, int] = Field(default_factory=dict)
    content: str
    created_at: datetime


class ExperienceList(Model):
    experiences: list[Experience]
    next_cursor: str | None = None


class Imported(Model):
    imported: int
    ids: list[str]


@dataclass(frozen=True)
class Event:
    """One item of an event stream. Stored events have ``id`` (their stream sequence) and
    ``event`` = the event type with ``data`` its JSON; ``live`` token deltas and ``subtree``
    notices have no id."""

    event: str
    data: dict[str, Any] = field(default_factory=dict)
    id: int | None = None

    @property
    def ends_run(self) -> bool:
        """A final event, or a wait only the client ends."""
        return self.event in FINAL_STATUSES or (
            self.event == "waiting" and self.data.get("reason") in PERSON_WAITS
        )


class CheckVerdict(Model):
    """What one library check (contains, regex, equals, json_schema, rubric) said of a run."""

    check: str
    passed: bool
    detail: str = ""
    skipped: bool = False


class EvalRun(Model):
    """One scored (task, model, repeat) of an eval."""

    task: str
    model: str
    repeat: int
    trace_id: str
    status: str
    passed: bool
    tokens: int = 0
    cost: float = 0.0
    duration_s: float = 0.0
    model_calls: int = 0
    recovered: bool = False
    reasons: list[str] = Field(default_factory=list)
    diverged: str | None = None
    """On a replay: where the run first did something else than its record."""
    output: str | None = None
    """Its final answer (cut to 4,000 characters)."""
    checks: list[CheckVerdict] = Field(default_factory=list)
    ended_at: float = 0.0


class EvalSummary(Model):
    eval_id: str
    suite_name: str
    models: list[str]
    repeat: int
    tasks: int
    created_at: float
    replay_of: str | None = None


class Eval(EvalSummary):
    """An eval run: its suite, the runs scored so far and the table per model."""

    suite: dict[str, Any]
    runs: list[EvalRun]
    summary: dict[str, dict[str, Any]]


class EvalList(Model):
    evals: list[EvalSummary]


class TaskFromTrace(Model):
    """A suite task made from a recorded run; ``skipped_files`` were not text."""

    task: dict[str, Any]
    skipped_files: list[str] = Field(default_factory=list)


class EvalCheck(Model):
    """What a run's ``check`` did in its working directory, and its library checks'
    verdicts."""

    trace_id: str
    passed: bool
    log: str
    checks: list[CheckVerdict] = Field(default_factory=list)


class Template(Model):
    """What a schedule or trigger starts: ``kind`` trace or task, ``body`` the create body."""

    kind: str
    body: dict[str, Any]


class Schedule(Model):
    """A schedule: one of ``cron`` (in ``timezone``), ``every_s`` or ``at``; ``next_run_at``
    its next tick (RFC 3339, UTC)."""

    schedule_id: str
    name: str
    cron: str | None = None
    timezone: str = "UTC"
    every_s: float | None = None
    at: str | None = None
    template: Template
    overlap: str
    catch_up: str
    paused: bool
    next_run_at: str | None = None
    runs_started: int = 0
    skipped: int = 0
    last_error: str = ""
    failures: int = 0
    """Ticks in a row that started nothing."""
    paused_reason: str = ""
    """Why longhaul paused it (too many failures in a row); cleared on resume."""


class ScheduleList(Model):
    schedules: list[Schedule]


class ScheduleRun(Model):
    run_id: str
    kind: str
    tick: str
    manual: bool = False
    status: str | None = None


class ScheduleRuns(Model):
    schedule_id: str
    runs: list[ScheduleRun]


class RunStarted(Model):
    """A run a schedule or trigger started; ``new`` false: a repeat, nothing started."""

    run_id: str
    kind: str
    trace_id: str | None = None
    task_id: str | None = None
    new: bool


class Trigger(Model):
    """A signed webhook: POST ``url`` (the signature: docs/05-schedules-and-notifications.md)."""

    trigger_id: str
    name: str
    template: Template
    url: str


class TriggerCreated(Trigger):
    secret: str
    """The HMAC key, given only in this answer."""


class TriggerList(Model):
    triggers: list[Trigger]


class InboxPhase(Model):
    id: str
    name: str
    description: str = ""
    depends_on: list[str] = Field(default_factory=list)


class InboxItem(Model):
    """One wait for a person: a ``question`` (answer with ``reply``), an ``approval`` of one
    call (``approve``, with ``arguments`` to run an edited call) or a ``plan_review`` of a
    task (``review_plan``)."""

    kind: str
    trace_id: str | None
    task_id: str | None = None
    since: float
    name: str | None = None
    deadline: float | None = None
    on_deadline: str | None = None
    question: str | None = None
    tool_call_id: str | None = None
    tool: str | None = None
    arguments: Any = None
    truncated: bool = False
    outcome_unknown: bool = False
    goal: str | None = None
    phases: list[InboxPhase] | None = None


class Inbox(Model):
    items: list[InboxItem]
    count: int


class UsageRow(Model):
    """What was spent in one group (a field not grouped by is ``None``)."""

    key: str | None = None
    model: str | None = None
    preset: str | None = None
    day: str | None = None
    tokens: int
    usd: float
    calls: int


class Usage(Model):
    group_by: list[str]
    since: str | None = None
    rows: list[UsageRow]
    total: UsageRow


class BudgetWait(Model):
    trace_id: str
    key: str | None = None
    name: str | None = None
    since: float
    detail: str


class BudgetWaits(Model):
    items: list[BudgetWait]
    count: int


class BudgetAnswered(Model):
    trace_id: str
    status: str
    raised_usd: float
    raised_tokens: int
