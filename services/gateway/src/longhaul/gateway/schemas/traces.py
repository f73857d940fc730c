"""Trace requests and views (docs/09-api.md shapes)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any, Literal

import msgspec
from longhaul.domain import events as ev
from longhaul.gateway.schemas.common import Body, Input, Name, Sequence, ShortText, Text
from longhaul.gateway.schemas.derived import view_of
from longhaul.gateway.schemas.runs import MAX_RUN_FILES, RouteView, RunFile
from longhaul.gateway.schemas.settings import (
    SettingsBody,
    with_settings,
)
from pydantic import BaseModel, ConfigDict, Field

TraceStatusName = Literal["running", "waiting", "completed", "failed", "stopped"]


MAX_MESSAGES_PAGE = 10_000
"""The most messages one page of ``GET …/messages`` holds."""
MAX_SEQUENCE = 2**63 - 1
"""The largest message sequence a query may name (JSON's safe integers and JetStream's)."""


class FunctionCallModel(Input):
    name: Name
    arguments: Text = "{}"


class ToolCallModel(Input):
    id: str = Field(min_length=1, max_length=128)
    type: Literal["function"] = "function"
    function: FunctionCallModel


Content = Text | list[dict[str, Any]] | None


class _Message(Input):
    """OpenAI-format message fields shared by every role. Unknown keys (``refusal``,
    ``annotations`` …) that chat clients carry along are ignored."""

    content: Content = None
    name: ShortText | None = None


class SystemMessage(_Message):
    role: Literal["system"]


class UserMessage(_Message):
    role: Literal["user"]


class AssistantMessage(_Message):
    role: Literal["assistant"]
    tool_calls: list[ToolCallModel] | None = Field(default=None, max_length=128)


class ToolMessage(_Message):
    role: Literal["tool"]
    tool_call_id: str = Field(min_length=1, max_length=128)


ChatMessage = Annotated[
    SystemMessage | UserMessage | AssistantMessage | ToolMessage, Field(discriminator="role")
]
"""One message a client supplies; the role decides which fields it may carry."""


class _CreateTraceRequest(SettingsBody):
    messages: list[ChatMessage] = Field(min_length=1, max_length=2000)
    files: list[RunFile] = Field(
        default_factory=list,
        max_length=MAX_RUN_FILES,
        description="written into the trace's working directory before its first model call "
        "(in all at most gateway.max_body_bytes; larger: POST /api/traces/{id}/files)",
    )
    name: ShortText | None = None


if TYPE_CHECKING:  # the settings fields are added at runtime; code reads them via settings()
    CreateTraceRequest = _CreateTraceRequest
else:
    CreateTraceRequest = with_settings("CreateTraceRequest", _CreateTraceRequest)


class _RunRequest(SettingsBody):
    """Continue (no ``after_sequence``), rewind (``after_sequence`` = N, new messages hang
    under N) or regenerate (``after_sequence`` = a user message, no new messages)."""

    messages: list[ChatMessage] = Field(default_factory=list, max_length=2000)
    after_sequence: Sequence | None = None


RUN_CHANGES = {
    "model": "move the trace to this model from this run on",
    "model_params": "replace the trace's model_params from this run on",
}
"""The settings a run request may change, from that run on."""

if TYPE_CHECKING:  # the settings fields are added at runtime; code reads them via settings()
    RunRequest = _RunRequest
else:
    RunRequest = with_settings("RunRequest", _RunRequest, RUN_CHANGES, RUN_CHANGES)


class InboxRequest(Body):
    """A message for a trace's inbox; it sees a reminder and reads it with check_messages."""

    model_config = ConfigDict(strict=True, extra="forbid", populate_by_name=True)

    sender: ShortText = Field(alias="from", min_length=1, description="who sends it")
    content: Text = Field(min_length=1)
    conversation_id: ShortText | None = None
    wake: bool = Field(
        default=False,
        description="also wake the trace if it waits on a person or on its sub-traces",
    )


class WebhookMessage(InboxRequest):
    """``POST /webhook/a2a-messages``: the inbox message with its target trace in the body."""

    trace_id: str = Field(min_length=1, max_length=128)


class MessageAccepted(BaseModel):
    trace_id: str
    message_id: str
    event_id: int = Field(description="stream sequence of the message_received event")


class ReplyRequest(Body):
    content: Text = Field(min_length=1)


class ApproveRequest(Body):
    # took_effect with approved is refused by the fold (409); the schema says so for clients
    model_config = ConfigDict(
        json_schema_extra={
            "if": {"properties": {"took_effect": {"const": True}}, "required": ["took_effect"]},
            "then": {"properties": {"approved": {"const": False}}},
        }
    )

    tool_call_id: str = Field(min_length=1, max_length=128)
    approved: bool = Field(
        description="run the call (for a call whose outcome is unknown: run it again, with "
        "the same idempotency key); false: deny it (outcome unknown: it did not take effect)"
    )
    reason: Text | None = Field(
        default=None, description="shown to the model when denied or marked done"
    )
    took_effect: bool = Field(
        default=False,
        description="only for a call whose outcome is unknown (pending with outcome_unknown): "
        "it did take effect and is not run again; with approved true it is a 409",
    )
    arguments: dict[str, Any] | None = Field(
        default=None,
        description="approve with these arguments instead of the model's (approved true only; "
        "checked against the tool's schema: 422 invalid_arguments)",
    )


class ToolResultBody(Body):
    tool_call_id: str = Field(min_length=1, max_length=128)
    content: Text
    is_error: bool = False


class ToolResultsRequest(Body):
    results: list[ToolResultBody] = Field(min_length=1, max_length=64)


class PendingCallView(BaseModel):
    """A tool call waiting for a person's decision."""

    tool_call_id: str
    name: str
    arguments: str
    outcome_unknown: bool = Field(
        default=False,
        description="the call was cut off by a crash while it acted (effect ledger): approve "
        "runs it again with the same key, deny says it failed, took_effect says it happened",
    )


class ModelSwitchView(BaseModel):
    """A provider outage moved the trace to its next fallback model (``model_switched``)."""

    model_config = ConfigDict(populate_by_name=True)

    from_model: str = Field(alias="from")
    to: str
    reason: str
    after_sequence: int = Field(description="the message the switch came after (0: before any)")


class CutOffEffectView(BaseModel):
    """A call with effects that a crash cut off while it acted, and how it was resumed."""

    tool_call_id: str
    tool: str
    effects: Literal["idempotent", "unsafe"]
    idempotency_key: str
    resolutions: list[str] = Field(
        description="each resumption in order: rerun (idempotent, same key), reconciled_done, "
        "reconciled_not_done (the tool's reconcile hook), asked (waited for a person), "
        "run_again (a person's decision), told_model (effects in the sandbox: the model was "
        "told what is known)"
    )
    decision: Literal["run_again", "took_effect", "failed"] | None = Field(
        default=None, description="what a person decided about it, if one was asked"
    )
    settled: bool = Field(description="its result is in the trace")


class ReflectRequest(Body):
    focus: Text | None = None


class Erased(BaseModel):
    """What a delete erased: the ids (traces with their local sub-traces, the task), the
    events purged from the stream, bucket entries and stored objects removed, and what
    became of the working directory (``removed``, ``absent``, ``shared`` — a sub-trace's or
    step trace's is its root's or task's —, ``unreached``: no executor answered)."""

    deleted: list[str]
    events: int
    entries: int
    objects: int
    working_dir: Literal["removed", "absent", "shared", "unreached"]


class Deleted(Erased):
    trace_id: str


class KeyErased(Erased):
    owner: str
    skipped: list[str] = Field(description="tasks still planning or running, left as they are")


class KeyHoldings(BaseModel):
    """What one owner holds; ``configured: false`` is a key removed from
    ``gateway.api_keys`` (revoked): its runs were stopped and its schedules paused, and what it
    left waits here to be erased (``DELETE /api/admin/keys/{owner}/data``) or handed back by
    configuring the key again."""

    owner: str
    configured: bool
    traces: int = Field(description="traces, sub-traces and step traces included")
    active_traces: int = Field(description="those not ended (running, waiting or queued)")
    tasks: int
    schedules: int
    paused_schedules: int
    triggers: int


class KeyHoldingsList(BaseModel):
    keys: list[KeyHoldings] = Field(description="configured keys first, then revoked ones")


class Accepted(BaseModel):
    """The request is on the log. ``event_id`` is its stream sequence: pass it as
    ``Last-Event-ID`` to follow what happens next."""

    trace_id: str
    status: TraceStatusName
    event_id: int


class TotalsView(BaseModel):
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    saved_tokens: dict[str, int] = Field(
        default_factory=dict,
        description="estimated prompt tokens each saving removed: offload (one-time outputs "
        "sent as their note), compaction (completed goals folded, level-2 summaries)",
    )
    cost: float = 0.0
    duration_ms: int = 0


if TYPE_CHECKING:  # derived at runtime; mypy sees a model of unknown fields

    class RunUsageView(BaseModel): ...

    class MessageView(BaseModel): ...

    class EvalTagView(BaseModel): ...

else:
    RunUsageView = view_of(ev.RunUsage)
    EvalTagView = view_of(ev.EvalTag)
    # a message of the tree: the ``message_appended`` payload (client input folds into the
    # same shape) with ``created_at`` for its time
    MessageView = view_of(
        ev.MessageAppended,
        name="MessageView",
        exclude=frozenset(
            {
                *(field.name for field in msgspec.structs.fields(ev.Event)),
                "provider_fields",
                "long_term_memory",
                "include_output_only_once",
            }
        ),
        extra={"created_at": (float, 0.0)},
    )


class BudgetView(BaseModel):
    max_iterations: int | None = None
    max_tokens: int | None = None
    max_cost: float | None = None


class GoalStatsView(BaseModel):
    """What work filed under a goal used (``cumulative_stats``: with its sub-goals')."""

    model_calls: int = 0
    tokens: int = Field(default=0, description="prompt + completion tokens")
    cost: float = 0.0
    duration_ms: int = 0


class GoalView(BaseModel):
    id: str
    title: str
    parent_id: str | None = None
    status: str
    summary: str | None = None
    type: Literal["goal", "agent_call"] = Field(
        default="goal",
        description="agent_call: one agent/evaluate call, with its sub-traces (id root: the "
        "automatic root goal)",
    )
    reason: str | None = None
    criteria: list[str] = Field(default_factory=list)
    mode: str | None = Field(default=None, description="an agent_call's mode")
    sub_trace_ids: list[str] = Field(default_factory=list)
    self_stats: GoalStatsView = Field(default_factory=GoalStatsView)
    cumulative_stats: GoalStatsView = Field(default_factory=GoalStatsView)


class GoalTreeView(BaseModel):
    focus: str | None = None
    goals: list[GoalView] = Field(default_factory=list)


class SubTraceView(BaseModel):
    trace_id: str = Field(description="a local trace id, or agent://host:port/<id> on a remote")
    status: str = Field(
        description="the child's current status (waiting included); a remote child's last known one"
    )
    remote: str | None = Field(default=None, description="the configured remote running it")
    wait_reason: str | None = None
    mode: str
    task: str = ""
    summary: str = ""
    tool_call_id: str


class CollaboratorView(BaseModel):
    """Someone the trace works with: parent, sub-traces, siblings, a person it asked."""

    name: str = Field(description="parent, human, or a sub-trace's or sibling's trace id")
    type: Literal["agent", "human"]
    trace_id: str | None = None
    status: str
    summary: str = ""


class WaitingBelowView(BaseModel):
    """A descendant waiting on something outside the tree: where to look to unblock it."""

    trace_id: str
    parent_trace_id: str | None = None
    name: str | None = None
    reason: str | None = Field(default=None, description="human, verification, …")


class ContextView(BaseModel):
    """What the model is shown (GET …/context has the prompt and tool schemas themselves)."""

    hash: str
    preset: str
    model: str | None = None
    tools: list[str] = Field(default_factory=list)
    skills: list[str] = Field(default_factory=list)


class FaultView(BaseModel):
    """An event of the log that could not apply: skipped by every reader, kept here."""

    stream_seq: int = Field(default=0, description="position in the stream (0: unknown)")
    type: str = Field(default="", description="event type, empty if it did not decode")
    error: str


class TraceSummary(BaseModel):
    trace_id: str
    status: str
    name: str | None = None
    parent_trace_id: str | None = None
    task_id: str | None = None
    phase_id: str | None = None
    head_sequence: int = 0
    last_sequence: int = 0
    totals: TotalsView = Field(default_factory=TotalsView)
    error: str | None = None
    stop_reason: str | None = None
    faults: int = Field(default=0, description="events of its log that were skipped")
    wait_reason: str | None = Field(
        default=None, description="what a waiting trace waits for: human, verification, subtraces"
    )
    waiting_below: list[WaitingBelowView] = Field(
        default_factory=list,
        description="descendants waiting on a person or a verifier (a root shows that help is "
        "needed somewhere below it)",
    )
    created_at: float = 0.0
    updated_at: float = 0.0
    eval_id: str | None = Field(
        default=None, description="the eval it is one run of (listed only with evals=true)"
    )


class TraceView(TraceSummary):
    summary: str | None = None
    route: RouteView | None = Field(
        default=None, description="why POST /api/runs made a single-agent run"
    )
    wait_detail: str = ""
    eval: EvalTagView | None = Field(
        default=None, description="the eval run this trace is one run of (GET /api/evals/{id})"
    )
    schedule_id: str | None = Field(
        default=None, description="the schedule that started it (GET /api/schedules/{id})"
    )
    trigger_id: str | None = Field(
        default=None, description="the trigger whose signed webhook started it"
    )
    fault_log: list[FaultView] = Field(
        default_factory=list, description="the skipped events, latest 50"
    )
    context: ContextView | None = Field(
        default=None, description="the recorded context the model is shown (after a first turn)"
    )
    pending_client_calls: list[PendingCallView] = Field(
        default_factory=list,
        description="calls waiting for POST …/tool_results (wait_reason client_tools)",
    )
    pending_approvals: list[PendingCallView] = Field(
        default_factory=list, description="calls waiting for POST …/approve (wait_reason approval)"
    )
    cut_off_effects: list[CutOffEffectView] = Field(
        default_factory=list,
        description="calls with effects a crash cut off while they acted (the effect ledger)",
    )
    model: str | None = None
    model_switches: list[ModelSwitchView] = Field(
        default_factory=list,
        description="provider outages that moved the trace along its fallback chain; the "
        "last one's ``to`` is the model it runs on now",
    )
    preset: str = "default"
    runs: int = 0
    run_usage: RunUsageView = Field(
        default_factory=RunUsageView,
        description="what the current run used (budgets count over the run: since the "
        "request that started it, across waits, crashes and takeovers)",
    )
    budget: BudgetView = Field(default_factory=BudgetView, description="the trace's own limits")
    event_id: int = Field(description="stream sequence of the last event folded into this view")
    goal_tree: GoalTreeView = Field(default_factory=GoalTreeView)
    sub_traces: list[SubTraceView] = Field(default_factory=list)
    messaging: bool = Field(default=False, description="the trace has an inbox")
    unread_messages: int = Field(default=0, description="inbox messages not yet read")
    collaborators: list[CollaboratorView] = Field(default_factory=list)


class TraceList(BaseModel):
    traces: list[TraceSummary]
    next_cursor: str | None = Field(
        default=None, description="pass as ?cursor= for the next page; null on the last"
    )


class MessagesResponse(BaseModel):
    mode: Literal["main_path", "all"]
    head_sequence: int
    messages: list[MessageView]
