"""The event catalog: every domain event of docs/07-the-log.md as one msgspec tagged union.

Events are encoded as JSON. The envelope (``id``, ``type``, ``aggregate_id``, ``n``, ``ts``,
``causation_id``, ``correlation_id``, ``actor``, ``trace_context``) is filled by the writer;
``n`` and ``aggregate_id`` are stamped by the event store at append time so callers build
events from payload fields only.
"""

from __future__ import annotations

import time
from typing import Any, ClassVar, Literal

import msgspec
from longhaul.domain.ids import ulid
from longhaul.domain.messages import ToolCall, Usage

Aggregate = Literal["trace", "task", "schedule"]
TraceStatus = Literal["running", "waiting", "completed", "failed", "stopped"]
TaskStatus = Literal["planning", "awaiting_review", "running", "completed", "failed", "cancelled"]
PhaseStatus = Literal["pending", "running", "completed", "failed", "skipped"]
WaitReason = Literal["human", "verification", "subtraces", "approval", "client_tools", "budget"]
DeadlineAction = Literal["deny", "stop"]
"""What happens to a question or approval nobody answered by its deadline: ``deny`` (the
calls are denied, a question answered that no one replied), or ``stop`` the run."""


class EventDecodeError(ValueError):
    """A payload is not a valid event: malformed JSON, unknown type or wrong field types."""


class Unreadable(msgspec.Struct, kw_only=True):
    """A stored payload that does not decode as an event, as the log hands it to a fold (which
    records it as a fault and goes on)."""

    error: str
    stream_seq: int = 0


def _now() -> float:
    return time.time()


class Event(msgspec.Struct, tag_field="type", kw_only=True, omit_defaults=True):
    """Envelope shared by all events."""

    aggregate: ClassVar[Aggregate]

    id: str = msgspec.field(default_factory=ulid)
    aggregate_id: str = ""
    n: int = 0
    ts: float = msgspec.field(default_factory=_now)
    causation_id: str | None = None
    correlation_id: str | None = None
    actor: str = ""
    trace_context: dict[str, str] | None = None
    """The W3C trace context (``traceparent``, ``tracestate``) of the span that wrote the
    event, when tracing is on; also sent as its NATS headers (``longhaul.core.telemetry``)."""

    @property
    def type(self) -> str:
        return type(self).__struct_config__.tag  # type: ignore[return-value]


# ---------------------------------------------------------------- shared payload structs


class InputMessage(msgspec.Struct, kw_only=True, omit_defaults=True):
    """A message supplied by a client or a parent (OpenAI chat format)."""

    role: Literal["system", "user", "assistant", "tool"]
    content: str | list[dict[str, Any]] | None = None
    tool_calls: list[ToolCall] | None = None
    tool_call_id: str | None = None
    name: str | None = None


class NamedTool(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """``tool_choice: {name}``: the model must call this tool."""

    name: str


ToolChoice = Literal["auto", "required", "none"] | NamedTool


class ModelParams(msgspec.Struct, kw_only=True, omit_defaults=True, forbid_unknown_fields=True):
    """Sampling and tool-choice settings sent with every model call of a trace; each provider
    maps them to its wire format. ``None`` leaves the provider's default."""

    temperature: float | None = None
    top_p: float | None = None
    max_tokens: int | None = None
    """Per response (the trace-wide token budget is ``TraceConfig.max_tokens``)."""
    seed: int | None = None
    stop: list[str] | None = None
    tool_choice: ToolChoice | None = None
    parallel_tool_calls: bool | None = None
    """False: at most one tool call per response (OpenAI ``parallel_tool_calls``, Anthropic
    ``disable_parallel_tool_use``; the engine keeps only the first call of any other)."""

    def over(self, base: ModelParams | None) -> ModelParams:
        """These params with ``base``'s filling the fields left unset."""
        if base is None:
            return self
        values = {field: getattr(self, field) for field in self.__struct_fields__}
        return ModelParams(
            **{
                field: getattr(base, field) if value is None else value
                for field, value in values.items()
            }
        )


class ClientTool(msgspec.Struct, kw_only=True, omit_defaults=True, forbid_unknown_fields=True):
    """A tool the client defines and runs: offered to the model beside the trace's own
    tools; a call of it is handed to the client (``client_tools`` wait) and answered by the
    result the client posts."""

    name: str
    description: str = ""
    parameters: dict[str, Any] = msgspec.field(
        default_factory=lambda: {"type": "object", "properties": {}}
    )


class OutputSchema(msgspec.Struct, kw_only=True, omit_defaults=True, forbid_unknown_fields=True):
    """The final answer must be JSON matching ``schema`` (``{"type": "object"}``: any JSON
    object). Sent to the provider in its own form (``strict``: enforced exactly where the
    provider can) and checked when the model answers."""

    schema: dict[str, Any]
    name: str = "response"
    strict: bool = False


class TraceConfig(msgspec.Struct, kw_only=True, omit_defaults=True):
    """What a trace runs with; fixed at creation, overridable per run."""

    model: str | None = None
    model_fallback: list[str] | None = None
    """Models to move to, in order, when the model's provider is down (``None``: the preset's
    chain, else ``models.fallback`` for the default model)."""
    preset: str = "default"
    tools: list[str] | None = None
    skills: list[str] = msgspec.field(default_factory=list)
    max_iterations: int | None = None
    max_tokens: int | None = None
    max_cost: float | None = None
    temperature: float | None = None
    working_dir: str | None = None
    verification: dict[str, Any] | None = None
    system_prompt: str | None = None
    read_only: bool = False
    model_params: ModelParams | None = None
    approval: list[str] | None = None
    """Tools whose calls wait for a person's decision (``["*"]``: every tool but
    ``ask_human``); ``None``: the preset's list."""
    auto_execute_tools: bool = True
    """False: the client runs every tool call and posts the results (``client_tools`` wait)."""
    messaging: bool = False
    """The trace has an inbox: it accepts messages and is offered ``check_messages`` and
    ``send_message`` (its sub-traces inherit it)."""
    experiences: bool | None = None
    """Show the new trace the experiences that match its task (``None``: the preset decides)."""
    client_tools: list[ClientTool] | None = None
    """Tools the client runs (``/v1`` ``tools``): their calls wait for the client."""
    output_schema: OutputSchema | None = None
    """The final answer is JSON matching this schema (``/v1`` ``response_format``)."""
    on_limit: Literal["stop", "ask"] = "stop"
    """At ``max_tokens`` / ``max_cost``: stop the run, or ``ask`` (a ``budget`` wait that a
    raise or a stop answers, as at a key's spend limit)."""


class Goal(msgspec.Struct, kw_only=True, omit_defaults=True):
    id: str
    title: str
    parent_id: str | None = None
    status: Literal["pending", "in_progress", "done", "abandoned"] = "pending"
    summary: str | None = None
    created_at_sequence: int = 0
    type: Literal["goal", "agent_call"] = "goal"
    """``agent_call``: one ``agent`` / ``evaluate`` call, made by the fold from its
    ``subtrace_spawned`` events (never by the goal tool)."""
    reason: str | None = None
    """Why the goal exists (the goal tool's ``reason``; set by the fold for the root goal)."""
    criteria: list[str] = msgspec.field(default_factory=list)
    """What makes the goal done (the goal tool's ``criteria``): ``evaluate(target_goal_id)``
    judges against them."""
    mode: str | None = None
    """An ``agent_call`` goal's mode: delegate, explore or evaluate."""
    sub_trace_ids: list[str] = msgspec.field(default_factory=list)
    """An ``agent_call`` goal's children."""
    tool_call_id: str | None = None
    """The call an ``agent_call`` goal stands for."""


class Totals(msgspec.Struct, kw_only=True):
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    saved_tokens: dict[str, int] = msgspec.field(default_factory=dict)
    """Prompt tokens each saving removed (see ``Usage.saved_tokens``)."""
    cost: float = 0.0
    duration_ms: int = 0


class RunUsage(msgspec.Struct, kw_only=True, omit_defaults=True):
    """What the current run used so far (the budgets ``max_iterations`` / ``max_tokens`` /
    ``max_cost`` count this): model calls of the ReAct loop, prompt + completion tokens and
    cost, children's included (reported by ``subtrace_finished``). Folded from the log: reset
    by the request that starts a run (create, continue, rewind, regenerate), never by a wait,
    a crash or a takeover."""

    iterations: int = 0
    tokens: int = 0
    cost: float = 0.0


class RouteDecision(msgspec.Struct, kw_only=True, omit_defaults=True):
    """Why ``POST /api/runs`` made a trace or a task: the estimated complexity (0..1), the
    tier it fell in (``react`` below ``routing.skill_above``, ``skill`` up to
    ``routing.team_above``, ``team`` above), who estimated it (``model``: the utility model,
    ``rules``) and whether the client chose the kind itself (``mode`` ``trace``/``task``)."""

    complexity: float
    tier: Literal["react", "skill", "team"]
    reason: str
    source: Literal["model", "rules"]
    mode: Literal["auto", "trace", "task"] = "auto"


class PhaseSpec(msgspec.Struct, kw_only=True, omit_defaults=True):
    id: str
    name: str
    description: str = ""
    depends_on: list[str] = msgspec.field(default_factory=list)
    preset: str = "default"
    tools: list[str] | None = None
    criteria: list[str] = msgspec.field(default_factory=list)
    competitors: list[dict[str, Any]] = msgspec.field(default_factory=list)
    merge: Literal["best", "vote", "fusion", "first"] = "best"
    verification: dict[str, Any] | None = None
    model: str | None = None
    """Model of the phase's step trace (default: the task's, then the configured default)."""


# ---------------------------------------------------------------- trace events


class TraceEvent(Event, kw_only=True, omit_defaults=True):
    aggregate: ClassVar[Aggregate] = "trace"


class EvalTag(msgspec.Struct, kw_only=True, omit_defaults=True):
    """The eval run a trace is one run of (``longhaul.domain.evals``); the verifier runs its
    ``check`` in the trace's working directory once the trace completes."""

    eval_id: str
    task: str
    repeat: int
    check: str | None = None
    checks: list[dict[str, Any]] = msgspec.field(default_factory=list)
    """The library checks (``longhaul.domain.evals.Check``) the verifier scores it by."""
    notify: bool = False
    """Its ending is notified like any run's (``longhaul eval --notify``); else it is not."""


class TraceCreated(TraceEvent, tag="trace_created", kw_only=True, omit_defaults=True):
    messages: list[InputMessage]
    config: TraceConfig = msgspec.field(default_factory=TraceConfig)
    name: str | None = None
    owner: str | None = None
    parent_trace_id: str | None = None
    parent_goal_id: str | None = None
    parent_tool_call_id: str | None = None
    task_id: str | None = None
    phase_id: str | None = None
    root_trace_id: str | None = None
    """A sub-trace's top-most ancestor (unset on a root trace): its files live there."""
    depth: int = 0
    """Sub-trace level: 0 for a root, its parent's + 1 for a child."""
    max_descendants: int | None = None
    """A child's share of its root's descendant limit (what was left when it was created);
    ``None``: the configured limit (a root)."""
    route: RouteDecision | None = None
    """Set when ``POST /api/runs`` chose a single agent."""
    eval: EvalTag | None = None
    """Set on the runs of an eval (``POST /api/evals/{id}/runs``)."""
    files: list[FileUploaded] = msgspec.field(default_factory=list)
    """Written into the working directory before the first model call (an eval task's
    ``files``, which may name sub-directories)."""
    untitled: bool = False
    """The client gave no name: ``name`` is the first message's stand-in until the utility
    model titles the trace (``trace_titled``) when its first run ends."""
    schedule_id: str | None = None
    """Set on a run a schedule started (``/api/schedules``)."""
    trigger_id: str | None = None
    """Set on a run a signed webhook started (``/api/triggers``)."""


class RunRequested(TraceEvent, tag="run_requested", kw_only=True, omit_defaults=True):
    """Continue (no ``after_sequence``), rewind or regenerate (``after_sequence`` = N)."""

    messages: list[InputMessage] = msgspec.field(default_factory=list)
    after_sequence: int | None = None
    config: TraceConfig | None = None


class MessageAppended(
    TraceEvent, tag="message_appended", kw_only=True, omit_defaults=True, gc=False
):
    """``gc=False`` (and on its calls and usage): a long trace's fold holds hundreds of
    thousands of these, which hold no reference back to anything, and the cyclic collector
    rescanned them all at each full collection and through a snapshot's decode (issue 46)."""

    sequence: int
    parent_sequence: int | None
    role: Literal["system", "user", "assistant", "tool"]
    content: str | list[dict[str, Any]] | None = None
    tool_calls: list[ToolCall] | None = None
    tool_call_id: str | None = None
    name: str | None = None
    goal_id: str | None = None
    branch_type: Literal["main", "compression", "reflection"] = "main"
    usage: Usage | None = None
    cost: float = 0.0
    duration_ms: int = 0
    model: str | None = None
    synthetic: bool = False
    """Written by the harness, not the model or a tool (healed tool results, warnings)."""
    error_code: str | None = None
    finish_reason: str | None = None
    """How the model ended an assistant message, normalised across providers: ``stop``,
    ``length``, ``tool_calls``, ``content_filter`` (Anthropic ``refusal``) or the provider's own."""
    provider_fields: dict[str, Any] | None = None
    long_term_memory: str | None = None
    include_output_only_once: bool = False
    side_branch: bool = False
    """Work on a side branch (a level-2 compaction's rounds): kept in the tree, never the
    head, so the main path goes on where it was."""

    @property
    def created_at(self) -> float:
        return self.ts

    @property
    def aside(self) -> bool:
        """Hangs off the tree without becoming the head (reflections, side branches)."""
        return self.side_branch or self.branch_type == "reflection"

    def to_openai(self) -> dict[str, Any]:
        """The chat-format dict a model request carries."""
        out: dict[str, Any] = {"role": self.role, "content": self.content}
        if self.tool_calls:
            out["tool_calls"] = [call.to_openai() for call in self.tool_calls]
        if self.tool_call_id is not None:
            out["tool_call_id"] = self.tool_call_id
        if self.name is not None and self.role == "tool":
            out["name"] = self.name
        if self.provider_fields:
            out["provider_fields"] = self.provider_fields
        return out

    def tool_call_ids(self) -> list[str]:
        return [call.id for call in self.tool_calls or []]


class GoalChanged(TraceEvent, tag="goal_changed", kw_only=True, omit_defaults=True):
    op: Literal["add", "under", "after", "focus", "done", "abandon"]
    goal: Goal
    at_sequence: int = 0


class LoopWarned(TraceEvent, tag="loop_warned", kw_only=True, omit_defaults=True):
    tool: str
    message: str
    count: int = 2


class LoopStopped(TraceEvent, tag="loop_stopped", kw_only=True, omit_defaults=True):
    tool: str
    message: str


class Compacted(TraceEvent, tag="compacted", kw_only=True, omit_defaults=True):
    summary_sequence: int
    range: tuple[int, int]
    level: int = 2


class ModelSwitched(TraceEvent, tag="model_switched", kw_only=True, omit_defaults=True):
    """The model's provider failed (an outage, not the request's fault) or its circuit is
    open: the turn goes on with ``to``, the next model of the fallback chain, and so does the
    rest of the trace (``TraceState.model``)."""

    from_model: str = msgspec.field(name="from")
    to: str
    reason: str
    """``connect``, ``timeout``, ``server_error``, ``rate_limited``, ``quota`` or
    ``circuit_open`` (skipped without a call)."""
    error: str | None = None


class VerificationRequested(
    TraceEvent, tag="verification_requested", kw_only=True, omit_defaults=True
):
    attempt: int
    answer_sequence: int
    answer: str = ""
    method: dict[str, Any] | None = None


class VerificationPassed(TraceEvent, tag="verification_passed", kw_only=True, omit_defaults=True):
    attempt: int
    log: str = ""


class VerificationFailed(TraceEvent, tag="verification_failed", kw_only=True, omit_defaults=True):
    attempt: int
    errors: list[str] = msgspec.field(default_factory=list)
    log: str = ""


class Waiting(TraceEvent, tag="waiting", kw_only=True, omit_defaults=True):
    reason: WaitReason
    detail: str = ""
    tool_call_id: str | None = None
    pending_calls: list[str] = msgspec.field(default_factory=list)
    """``approval`` / ``client_tools``: the tool calls that wait for a decision / a result."""
    deadline: float | None = None
    """Unix time after which ``on_deadline`` is taken (executors' sweeper; ``waiting``'s
    ``human`` and ``approval`` waits only)."""
    on_deadline: DeadlineAction | None = None


class ClientToolResult(msgspec.Struct, kw_only=True, omit_defaults=True):
    tool_call_id: str
    content: str
    is_error: bool = False


class ToolResultsPosted(TraceEvent, tag="tool_results_posted", kw_only=True, omit_defaults=True):
    """The client ran tool calls a trace handed to it (``auto_execute_tools: false``, client
    tools)."""

    results: list[ClientToolResult]
    config: TraceConfig | None = None
    """The settings the rest of the run uses, when the client changed them with its results
    (a ``/v1`` request's ``tool_choice`` …)."""


class EffectStarted(TraceEvent, tag="effect_started", kw_only=True, omit_defaults=True):
    """A tool call with effects outside the trace is about to act (the effect ledger). Its
    tool result settles it; one still unsettled after a crash has an unknown outcome: an
    ``idempotent`` call is run again with the same key, an ``unsafe`` one is settled by its
    tool's ``on_unknown`` (see ``effect_resumed``)."""

    tool_call_id: str
    tool: str
    idempotency_key: str
    effects: Literal["idempotent", "unsafe"]


class EffectResumed(TraceEvent, tag="effect_resumed", kw_only=True, omit_defaults=True):
    """How a resumed turn dealt with a call whose outcome is unknown (``effect_started``
    without a result): ``rerun`` (idempotent, same key), ``reconciled_done`` /
    ``reconciled_not_done`` (the tool's ``reconcile`` hook answered; not done is run again),
    ``asked`` (waits for a person), ``run_again`` (a person said so; run with the same key),
    ``told_model`` (its effects stay in the trace's sandbox: the model is told what is known —
    the file as written, not written or changed since, or a command cut off — and inspects)."""

    tool_call_id: str
    resolution: Literal[
        "rerun", "reconciled_done", "reconciled_not_done", "asked", "run_again", "told_model"
    ]
    detail: str = ""


class ToolDecided(TraceEvent, tag="tool_decided", kw_only=True, omit_defaults=True):
    """A person approved or denied one tool call that waited for approval. For a call whose
    outcome is unknown, approved means run it again, denied means it did not take effect, and
    ``took_effect`` (never with approved) means it did: ``reason`` is what the model is told."""

    tool_call_id: str
    approved: bool
    reason: str = ""
    took_effect: bool = False
    arguments: dict[str, Any] | None = None
    """Approved with edited arguments (checked against the tool's schema): the call runs with
    these instead of the model's."""
    by: str = ""
    """Who decided: the API key's owner id, or ``deadline`` for a wait's default action."""


class HumanReplied(TraceEvent, tag="human_replied", kw_only=True, omit_defaults=True):
    content: str
    by: str = ""
    """Who answered: the API key's owner id, or ``deadline`` for a wait's default action."""


class BudgetAnswered(TraceEvent, tag="budget_answered", kw_only=True, omit_defaults=True):
    """The answer to a ``budget`` wait: ``raise`` lets this run spend ``usd`` / ``tokens`` more
    past every limit it counts (the key's day and month, its own ``max_cost`` /
    ``max_tokens``); ``stop`` stops it."""

    action: Literal["raise", "stop"]
    usd: float = 0.0
    tokens: int = 0
    by: str = ""
    """Who answered: the API key's owner id, or ``admin``."""


class ContextRecorded(TraceEvent, tag="context_recorded", kw_only=True, omit_defaults=True):
    """What the model is shown from now on: the system prompt, tool schemas, preset, skills and
    parameters, stored in the workspace under ``context/<trace id>/<hash>`` (the trace's own) and
    reused by every later turn and run until a run request changes the config."""

    hash: str
    preset: str
    model: str | None = None
    tools: list[str] = msgspec.field(default_factory=list)
    skills: list[str] = msgspec.field(default_factory=list)


class ExperiencesRecalled(TraceEvent, tag="experiences_recalled", kw_only=True, omit_defaults=True):
    """A new trace was matched against its key's experiences: the tags the utility model read
    from its first user message, the ids chosen, and the "Reference experiences" text that the
    fold appends to that message (``sequence``). Recorded once per trace, even with no match."""

    sequence: int
    intent: list[str] = msgspec.field(default_factory=list)
    state: list[str] = msgspec.field(default_factory=list)
    ids: list[str] = msgspec.field(default_factory=list)
    text: str = ""


class TraceTitled(TraceEvent, tag="trace_titled", kw_only=True, omit_defaults=True):
    """The display name the utility model made for a trace created ``untitled``, recorded
    once when its first run ends; ``error`` when no title came (the stand-in stays)."""

    name: str | None = None
    error: str | None = None


class ExperiencesCaptured(TraceEvent, tag="experiences_captured", kw_only=True, omit_defaults=True):
    """``memory.capture_on_completion``: the reflection run ``run`` made before it completed
    recorded these experiences (``error``: it recorded none, and why)."""

    run: int
    ids: list[str] = msgspec.field(default_factory=list)
    error: str | None = None


class FileUploaded(TraceEvent, tag="file_uploaded", kw_only=True, omit_defaults=True):
    """A client put a file in the trace's working directory; its bytes wait in the workspace
    under ``key`` until the executor writes them there before the next model call."""

    name: str
    size: int
    sha256: str
    key: str
    media_type: str = "application/octet-stream"


class FilesDelivered(TraceEvent, tag="files_delivered", kw_only=True, omit_defaults=True):
    """The executor wrote these uploads into the working directory and told the model."""

    names: list[str]


class SubtraceSpawned(TraceEvent, tag="subtrace_spawned", kw_only=True, omit_defaults=True):
    child_trace_id: str
    tool_call_id: str
    mode: Literal["delegate", "explore", "evaluate"] = "delegate"
    task: str = ""
    preset: str = "default"
    continue_from: str | None = None
    remote: str | None = None
    """A configured remote longhaul (``remote_agents``) runs the child instead of this one."""
    skills: list[str] = msgspec.field(default_factory=list)
    """The skills the child gets (empty: its preset's)."""
    messages: list[InputMessage] = msgspec.field(default_factory=list)
    """Conversation the parent seeds the child with (``agent(messages=…)``), before its task."""
    context: str | None = None
    """Background the parent hands the child (``agent(context=…)``), after its task."""


class RemoteSubtraceLinked(
    TraceEvent, tag="remote_subtrace_linked", kw_only=True, omit_defaults=True
):
    """The remote gateway created (or continued) the child: ``remote_id`` is
    ``agent://<host:port>/<its trace id>``. Each one is a durable wait the executors follow
    until the remote trace ends."""

    child_trace_id: str
    remote_id: str


class SubtraceFinished(TraceEvent, tag="subtrace_finished", kw_only=True, omit_defaults=True):
    """Recorded on the parent when a child reaches a final status."""

    child_trace_id: str
    status: TraceStatus
    summary: str = ""
    tokens: int = 0
    """Prompt + completion tokens of the child's run, its own children's included: they
    count toward the parent's (and so the root's) ``max_tokens``."""
    cost: float = 0.0
    descendants: int = 0
    """Sub-traces the child itself has (every level): they count toward the root's limit."""
    model_calls: int = 0
    """Model calls of the child's run (its sub-agents' reported ones included): its
    ``agent_call`` goal's stats on the parent."""
    duration_ms: int = 0
    """Wall time of the child's run."""


class MessageReceived(TraceEvent, tag="message_received", kw_only=True, omit_defaults=True):
    """A message for the trace's inbox (``POST /api/traces/{id}/inbox``, the a2a webhook, or
    ``send_message`` from a collaborator). ``wake``: a trace waiting on a human or on its
    sub-traces is woken to read it."""

    sender: str
    content: str
    conversation_id: str | None = None
    sender_trace_id: str | None = None
    wake: bool = False
    message_id: str = ""
    """Unique within the inbox (a re-delivered ``send_message`` names the same one)."""


class MessagesRead(TraceEvent, tag="messages_read", kw_only=True, omit_defaults=True):
    """``check_messages`` showed these inbox messages at ``at_sequence`` (a rewind before it
    makes them unread again)."""

    message_ids: list[str]
    at_sequence: int = 0


class StopRequested(TraceEvent, tag="stop_requested", kw_only=True, omit_defaults=True):
    reason: str = "user"


class ReflectRequested(TraceEvent, tag="reflect_requested", kw_only=True, omit_defaults=True):
    focus: str | None = None


class CompactRequested(TraceEvent, tag="compact_requested", kw_only=True, omit_defaults=True):
    pass


class Stopped(TraceEvent, tag="stopped", kw_only=True, omit_defaults=True):
    reason: str = "user"
    used: RunUsage | None = None
    """For a budget stop (``max_iterations`` / ``max_tokens`` / ``max_cost``): what the run
    used."""


class Completed(TraceEvent, tag="completed", kw_only=True, omit_defaults=True):
    summary: str = ""
    totals: Totals = msgspec.field(default_factory=Totals)


class Failed(TraceEvent, tag="failed", kw_only=True, omit_defaults=True):
    error: str
    stop_reason: str | None = None
    log: str = ""


# ---------------------------------------------------------------- task events


class TaskEvent(Event, kw_only=True, omit_defaults=True):
    aggregate: ClassVar[Aggregate] = "task"


class TaskCreated(TaskEvent, tag="task_created", kw_only=True, omit_defaults=True):
    goal: str
    mode: str = "plan"
    options: dict[str, Any] = msgspec.field(default_factory=dict)
    owner: str | None = None
    review: bool | None = None
    """Wait for a person to approve the plan (``None``: the planner's ``pipeline.plan_review``)."""
    route: RouteDecision | None = None
    """Set when ``POST /api/runs`` chose a planned team."""
    max_tokens: int | None = None
    max_cost: float | None = None
    """Caps on the sum over the task's step traces (exceeded: ``task_failed``, traces stopped)."""
    schedule_id: str | None = None
    """Set on a task a schedule started (``/api/schedules``)."""
    trigger_id: str | None = None
    """Set on a task a signed webhook started (``/api/triggers``)."""


class PlanCreated(TaskEvent, tag="plan_created", kw_only=True, omit_defaults=True):
    phases: list[PhaseSpec]
    source: str = "model"
    review: bool = False
    """Proposed for review: the task waits in ``awaiting_review`` for ``plan_reviewed``."""


class PlanReviewed(TaskEvent, tag="plan_reviewed", kw_only=True, omit_defaults=True):
    """A person's answer to a proposed plan: run it, run an edited plan (``phases``, checked
    like a model's plan before it is appended), or refuse it (the task ends ``cancelled``)."""

    approved: bool
    phases: list[PhaseSpec] | None = None
    reason: str = ""


class PhaseStarted(TaskEvent, tag="phase_started", kw_only=True, omit_defaults=True):
    phase_id: str
    trace_ids: list[str] = msgspec.field(default_factory=list)
    attempt: int = 1


class MergeCandidate(msgspec.Struct, kw_only=True, omit_defaults=True):
    """One competitor of a competitive phase as the merge saw it."""

    label: str
    trace_id: str
    status: str
    """The step trace's final status: only ``completed`` ones are candidates."""
    score: float | None = None
    """Its vote total (``vote`` only)."""


class MergeRecord(msgspec.Struct, kw_only=True, omit_defaults=True):
    """How a competitive phase's result was chosen, kept on the log with the result."""

    strategy: str
    """What the phase asked for: ``best``, ``vote``, ``fusion`` or ``first``."""
    method: str
    """What decided: ``judge``, ``vote``, ``fusion``, or ``first`` (asked for, or a fallback)."""
    candidates: list[MergeCandidate] = msgspec.field(default_factory=list)
    winner: str | None = None
    """The chosen step trace; ``None`` for a fusion of several."""
    reason: str = ""


class PhaseCompleted(TaskEvent, tag="phase_completed", kw_only=True, omit_defaults=True):
    phase_id: str
    output_ref: str = ""
    summary: str = ""
    trace_id: str | None = None
    merge: MergeRecord | None = None
    """Set for a competitive phase."""


class PhaseFailed(TaskEvent, tag="phase_failed", kw_only=True, omit_defaults=True):
    phase_id: str
    error: str = ""


class Replanned(TaskEvent, tag="replanned", kw_only=True, omit_defaults=True):
    reflection: str
    phases: list[PhaseSpec]
    kept: list[str] = msgspec.field(default_factory=list)


class TaskCompleted(TaskEvent, tag="task_completed", kw_only=True, omit_defaults=True):
    summary: str = ""


class TaskFailed(TaskEvent, tag="task_failed", kw_only=True, omit_defaults=True):
    error: str
    reflections: list[str] = msgspec.field(default_factory=list)


class ResumeRequested(TaskEvent, tag="resume_requested", kw_only=True, omit_defaults=True):
    pass


class Resumed(TaskEvent, tag="resumed", kw_only=True, omit_defaults=True):
    """The planner's answer to a resume request: which completed phases it skipped, where it
    learnt they were complete (``checkpoint``, ``event_log`` or ``mixed``), and the first
    unfinished layer, from which the task continues."""

    source: str
    skipped: list[str] = msgspec.field(default_factory=list)
    resumed_at: list[str] = msgspec.field(default_factory=list)


# ---------------------------------------------------------------- schedule events


class ScheduleEvent(Event, kw_only=True, omit_defaults=True):
    aggregate: ClassVar[Aggregate] = "schedule"


class ScheduleFailed(ScheduleEvent, tag="schedule_failed", kw_only=True, omit_defaults=True):
    """A schedule's tick that started nothing (the template refused, the key at its cap…),
    written by the gateway's ticker once per tick: what ``schedule.failed`` notices are
    made from. The schedule itself lives in ``lh_schedules``; its log holds only these."""

    owner: str | None = None
    name: str = ""
    tick_ms: int
    run_id: str
    """The run the tick would have started (its id derives from the tick)."""
    code: str
    error: str
    failures: int = 0
    """Failed ticks in a row, this one included (0: written before they were counted). Only
    the first of a run of failures, a change of reason and the pause are written."""
    paused: bool = False
    """This failure paused the schedule (``gateway.schedule_pause_after_failures``)."""


AnyEvent = (
    TraceCreated
    | RunRequested
    | MessageAppended
    | GoalChanged
    | LoopWarned
    | LoopStopped
    | Compacted
    | ModelSwitched
    | VerificationRequested
    | VerificationPassed
    | VerificationFailed
    | Waiting
    | HumanReplied
    | BudgetAnswered
    | FileUploaded
    | FilesDelivered
    | ContextRecorded
    | ExperiencesRecalled
    | TraceTitled
    | ExperiencesCaptured
    | ToolDecided
    | EffectStarted
    | EffectResumed
    | ToolResultsPosted
    | SubtraceSpawned
    | SubtraceFinished
    | RemoteSubtraceLinked
    | MessageReceived
    | MessagesRead
    | StopRequested
    | ReflectRequested
    | CompactRequested
    | Stopped
    | Completed
    | Failed
    | TaskCreated
    | PlanCreated
    | PlanReviewed
    | PhaseStarted
    | PhaseCompleted
    | PhaseFailed
    | Replanned
    | TaskCompleted
    | TaskFailed
    | ResumeRequested
    | Resumed
    | ScheduleFailed
)

EVENT_TYPES: dict[str, type[Event]] = {cls.__struct_config__.tag: cls for cls in AnyEvent.__args__}
TRACE_EVENT_TYPES = frozenset(t for t, c in EVENT_TYPES.items() if c.aggregate == "trace")
TASK_EVENT_TYPES = frozenset(t for t, c in EVENT_TYPES.items() if c.aggregate == "task")

_encoder = msgspec.json.Encoder()
_decoder: msgspec.json.Decoder[Any] = msgspec.json.Decoder(AnyEvent)


def encode(event: Event) -> bytes:
    return _encoder.encode(event)


def decode(data: bytes | str) -> Event:
    """Decode one event; any problem raises :class:`EventDecodeError`, never something else."""
    try:
        event: Event = _decoder.decode(data)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise EventDecodeError(str(exc)) from exc
    return event


def to_builtins(event: Event) -> dict[str, Any]:
    """A JSON-ready dict (for SSE and the API), including ``type``."""
    data: dict[str, Any] = msgspec.to_builtins(event)
    return data
