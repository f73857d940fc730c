"""``TraceState``: the fold of one trace's events.

The trace's own fields are its identity, lineage, status and run flags; the parts with rules
of their own are folds of their own, as the goal tree is, each handed the events it concerns:
the message tree (``messages``), what the trace used (``usage``), the files for its next turn
(``uploads``), the effect ledger (``effects``), its sub-traces (``children``), the
verification of its answer (``verification``), and what it waits on (``waits``). Their
fields are read through the names they had on ``TraceState``.

A snapshot of the previous shape (4, every field flat) is upgraded on read
(:data:`TraceState.UPGRADES`), never decoded into the wrong fields.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, ClassVar

import msgspec
from longhaul.domain import events as ev
from longhaul.domain.events import TraceConfig, TraceStatus, WaitReason
from longhaul.domain.state.children import Children, SubtraceInfo
from longhaul.domain.state.effects import Ledger
from longhaul.domain.state.errors import InvalidTransition
from longhaul.domain.state.faults import Fault
from longhaul.domain.state.goals import GoalStats, GoalTree
from longhaul.domain.state.messages import Message, MessageTree
from longhaul.domain.state.uploads import Uploads
from longhaul.domain.state.usage import Spending
from longhaul.domain.state.verification import VerificationState
from longhaul.domain.state.waits import WAKEABLE_WAITS, Approvals, ClientCalls, Inbox, Wait

__all__ = ["FINAL_STATUSES", "Message", "SubtraceInfo", "TraceState"]

FINAL_STATUSES: frozenset[str] = frozenset({"completed", "failed", "stopped"})


def _parts_of_shape_4(raw: dict[str, Any]) -> dict[str, Any]:
    """Shape 4 → 5: the flat fields of the message tree, the usage, the uploads and the
    sub-traces move into their parts (a key missing means it is not shape 4: ``KeyError``)."""
    tree = ("messages", "head_sequence", "last_sequence", "path", "image_messages")
    raw["tree"] = {key: raw.pop(key) for key in tree}
    raw["usage"] = {"totals": raw.pop("totals"), "run": raw.pop("run_usage")}
    raw["uploads"] = {"pending": raw.pop("uploads_pending")}
    raw["children"] = {"subtraces": raw.pop("subtraces")}
    return raw


class ModelSwitch(msgspec.Struct, kw_only=True):
    """A ``model_switched`` where it happened: after message ``after_sequence``."""

    from_model: str
    to: str
    reason: str
    after_sequence: int


class TraceState(msgspec.Struct, kw_only=True):
    SCHEMA: ClassVar[int] = 5
    """The shape of this fold: a snapshot of another shape is upgraded (:data:`UPGRADES`) or
    not read (``snapshots``)."""
    UPGRADES: ClassVar[Mapping[int, Callable[[dict[str, Any]], dict[str, Any]]]] = {
        4: _parts_of_shape_4
    }
    """Shape ``n`` → ``n + 1``, over a snapshot decoded without a type."""

    trace_id: str = ""
    status: TraceStatus | None = None
    name: str | None = None
    owner: str | None = None
    config: TraceConfig = msgspec.field(default_factory=TraceConfig)
    model: str | None = None
    """The model the trace moved to on a provider outage (``model_switched``); ``None``: its
    configured one. A run with a new config starts over from that."""
    model_switches: list[ModelSwitch] = msgspec.field(default_factory=list)
    parent_trace_id: str | None = None
    parent_goal_id: str | None = None
    parent_tool_call_id: str | None = None
    task_id: str | None = None
    phase_id: str | None = None
    root_trace_id: str | None = None
    depth: int = 0
    """Sub-trace level: 0 for a root."""
    route: ev.RouteDecision | None = None
    """Why ``POST /api/runs`` made this a single-agent run."""
    max_descendants: int | None = None
    """This trace's share of its root's descendant limit (``None``: the configured one)."""
    schedule_id: str | None = None
    """The schedule that started it (``/api/schedules``), or the trigger (below)."""
    trigger_id: str | None = None
    created_at: float = 0.0
    updated_at: float = 0.0
    run_started_at: float = 0.0
    """When the current run started (its duration is reported to a parent)."""

    tree: MessageTree = msgspec.field(default_factory=MessageTree)
    goals: GoalTree = msgspec.field(default_factory=GoalTree)
    usage: Spending = msgspec.field(default_factory=Spending)
    error: str | None = None
    stop_reason: str | None = None
    summary: str | None = None

    wait: Wait = msgspec.field(default_factory=Wait)
    approvals: Approvals = msgspec.field(default_factory=Approvals)
    client_calls: ClientCalls = msgspec.field(default_factory=ClientCalls)
    mailbox: Inbox = msgspec.field(default_factory=Inbox)
    ledger: Ledger = msgspec.field(default_factory=Ledger)
    """The effect ledger: calls with effects that started acting (settled by their tool
    result, see :meth:`unsettled_effects`) and how each one cut off was resumed."""
    context: ev.ContextRecorded | None = None
    """The recorded context the model is shown; ``None`` until the first turn records it and
    again after a run request that changes the config."""
    recalled: ev.ExperiencesRecalled | None = None
    """The experiences matched when the trace started (``None``: not matched)."""
    untitled: bool = False
    """Created without a name and not yet titled (``trace_titled`` clears it)."""
    title_error: str | None = None
    captured: dict[int, list[str]] = msgspec.field(default_factory=dict)
    """Run number → the experiences ``memory.capture_on_completion`` recorded at its end."""
    uploads: Uploads = msgspec.field(default_factory=Uploads)
    eval: ev.EvalTag | None = None
    """The eval run this trace is one run of."""
    stop_requested: bool = False
    reflect_focus: str | None = None
    reflect_requested: bool = False
    compact_requested: bool = False
    pending_warnings: list[str] = msgspec.field(default_factory=list)
    verification: VerificationState = msgspec.field(default_factory=VerificationState)
    children: Children = msgspec.field(default_factory=Children)
    runs: int = 0
    run_trace_context: dict[str, str] | None = None
    """Trace context of the event that started the current run (the request that created or
    continued the trace): every turn of the run is its child, on whichever executor."""
    faults: list[Fault] = msgspec.field(default_factory=list)
    """Events of the log this fold skipped (see ``faults``)."""

    version: int = 0
    """``n`` of the last applied event."""
    stream_seq: int = 0
    """Stream sequence of the last applied event (the store's optimistic-concurrency token)."""

    # ------------------------------------------------------------------ the parts, as read

    @property
    def messages(self) -> dict[int, Message]:
        return self.tree.messages

    @property
    def head_sequence(self) -> int:
        return self.tree.head_sequence

    @property
    def last_sequence(self) -> int:
        return self.tree.last_sequence

    @property
    def path(self) -> list[int]:
        return self.tree.path

    @property
    def image_messages(self) -> int:
        return self.tree.image_messages

    @property
    def totals(self) -> ev.Totals:
        return self.usage.totals

    @property
    def run_usage(self) -> ev.RunUsage:
        """What the current run used: the budgets count this (reset only by a new run)."""
        return self.usage.run

    @run_usage.setter
    def run_usage(self, value: ev.RunUsage) -> None:
        self.usage.run = value

    @property
    def uploads_pending(self) -> list[ev.FileUploaded]:
        """Files uploaded but not yet written into the working directory (latest per name)."""
        return self.uploads.pending

    @property
    def subtraces(self) -> dict[str, SubtraceInfo]:
        return self.children.subtraces

    @property
    def wait_reason(self) -> WaitReason | None:
        return self.wait.reason

    @property
    def wait_detail(self) -> str:
        return self.wait.detail

    @property
    def wait_tool_call_id(self) -> str | None:
        return self.wait.tool_call_id

    @property
    def human_reply(self) -> str | None:
        return self.wait.human_reply

    @property
    def interrupted_wait(self) -> WaitReason | None:
        return self.wait.interrupted

    @property
    def approval_pending(self) -> list[str]:
        return self.approvals.pending

    @property
    def tool_decisions(self) -> dict[str, ev.ToolDecided]:
        return self.approvals.decisions

    @property
    def client_pending(self) -> list[str]:
        return self.client_calls.pending

    @property
    def client_results(self) -> dict[str, ev.ClientToolResult]:
        return self.client_calls.results

    @property
    def inbox(self) -> list[ev.MessageReceived]:
        return self.mailbox.messages

    @property
    def inbox_read(self) -> dict[str, int]:
        return self.mailbox.read

    @property
    def descendants(self) -> int:
        """Sub-traces below this trace at every level, as far as its log knows."""
        return self.children.descendants

    # ------------------------------------------------------------------ queries

    @property
    def exists(self) -> bool:
        return self.status is not None

    @property
    def is_final(self) -> bool:
        return self.status in FINAL_STATUSES

    def main_path(self) -> list[Message]:
        return self.tree.main_path()

    def all_messages(self) -> list[Message]:
        return self.tree.all_messages()

    def path_to(self, sequence: int) -> list[int]:
        """Sequences from the root to ``sequence`` inclusive."""
        return self.tree.path_to(sequence)

    def unanswered_tool_calls(self, upto: int | None = None) -> list[ev.ToolCall]:
        """Calls of the last assistant ``tool_calls`` message on the path to ``upto`` (default
        head) that have no tool result after it on that path."""
        return self.tree.unanswered_tool_calls(upto)

    def unsettled_effects(self) -> list[ev.ToolCall]:
        """Calls of the head's tool-call message that started acting and have no result: their
        outcome is unknown (the executor died meanwhile)."""
        return self.ledger.unsettled(self.tree.unanswered_tool_calls())

    def unread_messages(self) -> list[ev.MessageReceived]:
        return self.mailbox.unread()

    def safe_cut(self, sequence: int) -> int:
        """The cut at ``sequence`` moved forward past the tool results its calls need."""
        return self.tree.safe_cut(self.trace_id, sequence)

    def running_subtraces(self) -> list[SubtraceInfo]:
        return self.children.running()

    def run_model_calls(self) -> int:
        """Model calls of the current run (what a parent's ``agent_call`` goal is charged):
        the loop's own, plus those its sub-agents reported."""
        return self.usage.run.iterations + self.children.model_calls()

    def tools_for_children(self) -> list[str] | None:
        """The most a child of this trace may be offered: the tools this trace's model was
        shown (its recorded context), else its own ``tools`` list. Delegating never widens
        what a client or a preset allowed; the child's preset only narrows it."""
        if self.context is not None:
            return list(self.context.tools)
        return None if self.config.tools is None else list(self.config.tools)

    # ------------------------------------------------------------------ fold

    def apply(self, event: ev.Event, stream_seq: int = 0) -> None:
        """Apply one event; raises :class:`InvalidTransition` if it cannot happen."""
        self.check(event)
        _HANDLERS[type(event)](self, event)
        self.version = event.n or self.version + 1
        if stream_seq:
            self.stream_seq = stream_seq
        self.updated_at = event.ts

    def check(self, event: ev.Event) -> None:
        """Raise :class:`InvalidTransition` if ``event`` could not apply; changes nothing.

        Every rule of the fold lives here and handlers only mutate, so a writer checks an
        event before appending it without copying the state."""
        checker = _CHECKS.get(type(event))
        if checker is None:
            raise InvalidTransition(f"{event.type} is not a trace event", code="wrong_aggregate")
        if not self.exists and not isinstance(event, ev.TraceCreated):
            raise InvalidTransition(f"trace {event.aggregate_id} does not exist", code="not_found")
        if event.aggregate_id and self.trace_id and event.aggregate_id != self.trace_id:
            # Stored on this trace's subject but naming another: forged or misrouted.
            raise InvalidTransition(
                f"event of {event.aggregate_id} in trace {self.trace_id}", code="wrong_aggregate"
            )
        checker(self, event)

    def check_message(self, event: ev.MessageAppended) -> None:
        """Raise :class:`InvalidTransition` if the message ``event`` could not apply: the
        fold's own checks, in O(1) and without a copy (messages are most of a trace's events,
        so writers check them this way rather than with :meth:`check`)."""
        self._require("running", what="append a message")
        self.tree.check_follows(event.sequence, event.parent_sequence)

    def _require(self, *allowed: str, what: str) -> None:
        if self.status not in allowed:
            raise InvalidTransition(
                f"cannot {what}: trace {self.trace_id} is {self.status}", code="conflict"
            )

    def _require_wait(self, reason: str) -> None:
        if self.status != "waiting" or self.wait.reason != reason:
            raise InvalidTransition(
                f"trace {self.trace_id} is not waiting for {reason}", code="conflict"
            )

    # checks (pure) -----------------------------------------------------------

    def _check_created(self, event: ev.TraceCreated) -> None:
        if self.exists:
            raise InvalidTransition(f"trace {event.aggregate_id} already exists", code="conflict")

    def _check_run_requested(self, event: ev.RunRequested) -> None:
        self._require("completed", "failed", "stopped", "waiting", what="run")
        if self.status == "waiting" and event.after_sequence is None and not event.messages:
            raise InvalidTransition("trace is waiting; reply or rewind instead", code="conflict")
        if event.after_sequence is not None:
            self.safe_cut(event.after_sequence)

    def _check_goal_changed(self, event: ev.GoalChanged) -> None:
        self._require("running", what="change goals")
        self.goals.check(event.op, event.goal)

    def _check_nothing(self, event: ev.Event) -> None:
        """Loop warnings and compaction records apply to any existing trace."""

    def _check_message_received(self, event: ev.MessageReceived) -> None:
        self._require("running", "waiting", what="receive a message")
        self.mailbox.check_received(self.trace_id, self.config.messaging, event)

    def _check_tool_results(self, event: ev.ToolResultsPosted) -> None:
        self._require_wait("client_tools")
        self.client_calls.check(self.trace_id, event)

    def _check_effect_started(self, event: ev.EffectStarted) -> None:
        self._require("running", what="start an effect")
        self.ledger.check_started(self.trace_id, event, self.tree.unanswered_tool_calls())

    def _check_effect_resumed(self, event: ev.EffectResumed) -> None:
        self._require("running", what="resume an effect")
        self.ledger.check_resumed(self.trace_id, event)

    def _check_tool_decided(self, event: ev.ToolDecided) -> None:
        self._require_wait("approval")
        self.approvals.check(self.trace_id, event)
        self.ledger.check_decided(self.trace_id, event)

    def _check_experiences_recalled(self, event: ev.ExperiencesRecalled) -> None:
        self._require("running", what="recall experiences")
        if self.recalled is not None:
            raise InvalidTransition("experiences were already recalled", code="conflict")
        message = self.tree.messages.get(event.sequence)
        if message is None or message.role != "user":
            raise InvalidTransition(
                f"message {event.sequence} is not a user message", code="unknown_sequence"
            )

    # handlers (mutate only: :meth:`check` ran first) ---------------------------

    def _on_created(self, event: ev.TraceCreated) -> None:
        self.trace_id = event.aggregate_id
        self.status = "running"
        self.name = event.name
        self.untitled = event.untitled
        self.owner = event.owner
        self.config = event.config
        self.parent_trace_id = event.parent_trace_id
        self.parent_goal_id = event.parent_goal_id
        self.parent_tool_call_id = event.parent_tool_call_id
        self.task_id = event.task_id
        self.phase_id = event.phase_id
        self.root_trace_id = event.root_trace_id
        self.depth = event.depth
        self.max_descendants = event.max_descendants
        self.route = event.route
        self.eval = event.eval
        self.schedule_id = event.schedule_id
        self.trigger_id = event.trigger_id
        self.uploads.pending = list(event.files)
        self.created_at = event.ts
        self.runs = 1
        self.run_started_at = event.ts
        self.run_trace_context = event.trace_context
        self.goals.open_root(_root_title(event))
        self.tree.append_inputs(event.messages, event.ts, self.goals.focus)

    def _on_run_requested(self, event: ev.RunRequested) -> None:
        if event.after_sequence is not None:
            self._rewind_to(self.safe_cut(event.after_sequence))
        if event.config is not None:
            self.config = event.config
            self.context = None  # a changed config is recorded afresh by the next turn
            self.model = None
        self._reset_run(event)
        self.tree.append_inputs(event.messages, event.ts, self.goals.focus)

    def _reset_run(self, event: ev.Event) -> None:
        self.status = "running"
        self.runs += 1
        self.run_started_at = event.ts
        self.run_trace_context = event.trace_context
        self.usage.new_run()
        self.pending_warnings = []  # a warning belongs to the run that earned it
        self.error = None
        self.stop_reason = None
        self.summary = None
        self.stop_requested = False
        self.wait = Wait()
        self.approvals.pending = []
        self.client_calls.pending = []
        self.verification = VerificationState()

    def _rewind_to(self, cut: int) -> None:
        on_path = self.tree.rewind_to(cut)
        self.goals = self.goals.as_of(on_path)
        self.pending_warnings = []
        self.mailbox.forget_reads_off(on_path)
        self.ledger.forget_off(
            {call.id for seq in self.tree.path for call in self.tree.messages[seq].tool_calls or []}
        )

    def _on_message(self, event: ev.MessageAppended) -> None:
        self.tree.insert(event)
        self.usage.charge(event)
        usage = event.usage
        self.goals.charge(
            event.goal_id,
            GoalStats(
                model_calls=0 if usage is None else 1,
                tokens=0 if usage is None else usage.prompt_tokens + usage.completion_tokens,
                cost=event.cost,
                duration_ms=event.duration_ms,
            ),
        )
        if event.role == "assistant":
            self.pending_warnings = []
        if event.role == "user" and self.verification.unconsumed_failure:
            self.verification.on_user_message()
        if event.role == "tool":
            self.wait.on_tool_result(event.tool_call_id)
        if event.branch_type == "reflection":
            self.reflect_requested = False
            self.reflect_focus = None

    def _on_goal_changed(self, event: ev.GoalChanged) -> None:
        self.goals.apply(event.op, event.goal, event.at_sequence or self.tree.head_sequence)

    def _on_loop_warned(self, event: ev.LoopWarned) -> None:
        self.pending_warnings.append(event.message)

    def _on_loop_stopped(self, event: ev.LoopStopped) -> None:
        self.stop_reason = "loop_detected"

    def _on_compacted(self, event: ev.Compacted) -> None:
        self.compact_requested = False

    def _on_verification_requested(self, event: ev.VerificationRequested) -> None:
        self.verification.request(event)
        self._wait("verification", f"attempt {event.attempt}")

    def _on_verification_passed(self, event: ev.VerificationPassed) -> None:
        self.verification.succeed()
        self._wake()

    def _on_verification_failed(self, event: ev.VerificationFailed) -> None:
        self.verification.fail(event)
        self._wake()

    def _on_waiting(self, event: ev.Waiting) -> None:
        self.status = "waiting"
        self.wait.begin_timed(event)
        if event.reason == "approval":
            self.approvals.pending = list(event.pending_calls)
        elif event.reason == "client_tools":
            self.client_calls.pending = list(event.pending_calls)

    def _on_tool_results(self, event: ev.ToolResultsPosted) -> None:
        if event.config is not None:
            self.config = event.config
            self.context = None  # a changed config is recorded afresh by the next turn
        if self.client_calls.post(event):
            self._wake()

    def _on_context_recorded(self, event: ev.ContextRecorded) -> None:
        self.context = event

    def _on_experiences_recalled(self, event: ev.ExperiencesRecalled) -> None:
        """The reference text joins the first user message (a new struct: the event that
        carried the message stays as it was logged)."""
        self.recalled = event
        if event.text:
            messages = self.tree.messages
            message = messages[event.sequence]
            content = message.content
            if isinstance(content, list):
                joined: Any = [*content, {"type": "text", "text": event.text}]
            else:
                joined = f"{content}\n\n{event.text}" if content else event.text
            messages[event.sequence] = msgspec.structs.replace(message, content=joined)

    def _on_tool_decided(self, event: ev.ToolDecided) -> None:
        self.ledger.decide(event)
        if self.approvals.decide(event):
            self._wake()

    def _on_human_replied(self, event: ev.HumanReplied) -> None:
        self.wait.human_reply = event.content
        self.status = "running"
        self.wait.reason = None

    def _on_budget_answered(self, event: ev.BudgetAnswered) -> None:
        if event.action == "stop":
            self.stop_requested = True  # the wait stands until the executor stops the run
            return
        self.usage.raise_by(event.tokens, event.usd)
        self._wake()

    def _on_subtrace_spawned(self, event: ev.SubtraceSpawned) -> None:
        call_goal = self.goals.spawned(
            event.tool_call_id,
            event.child_trace_id,
            event.mode,
            event.task,
            self.tree.head_sequence,
        )
        self.children.spawned(event, call_goal.id)

    def _on_message_received(self, event: ev.MessageReceived) -> None:
        self.mailbox.messages.append(event)
        if event.wake and self.status == "waiting" and self.wait.reason in WAKEABLE_WAITS:
            self.wait.interrupted = self.wait.reason
            self._wake()

    def _on_subtrace_finished(self, event: ev.SubtraceFinished) -> None:
        info = self.children.finished(event)
        if info.tool_call_id not in {c.id for c in self.tree.unanswered_tool_calls()}:
            # The call that spawned it was answered early (a message woke the parent):
            # the child's end arrives as a message instead of as that call's result.
            self.mailbox.messages.append(
                ev.MessageReceived(
                    id=event.id,
                    ts=event.ts,
                    sender=f"sub-agent {event.child_trace_id}",
                    sender_trace_id=event.child_trace_id,
                    content=f"finished ({event.status}): {event.summary}",
                    message_id=event.id,
                )
            )
        self.usage.charge_child(event)
        self._settle_call_goal(info.tool_call_id, event)
        if self.wait.reason == "subtraces" and not self.children.running():
            self._wake()

    def _settle_call_goal(self, tool_call_id: str, event: ev.SubtraceFinished) -> None:
        """The child's use joins its call's goal; the last child's end settles the goal."""
        goal = self.goals.call_goal(tool_call_id)
        if goal is None:
            return
        used = GoalStats(
            model_calls=event.model_calls,
            tokens=event.tokens,
            cost=event.cost,
            duration_ms=event.duration_ms,
        )
        self.goals.charge(goal.id, used)
        children = self.children.of(goal.sub_trace_ids)
        if all(info.status != "running" for info in children):
            self.goals.settled(
                tool_call_id, [(i.display_id, i.status, i.summary) for i in children]
            )

    def _on_stop_requested(self, event: ev.StopRequested) -> None:
        self.stop_requested = True

    def _on_reflect_requested(self, event: ev.ReflectRequested) -> None:
        self._resume_if_idle(event)
        self.reflect_requested = True
        self.reflect_focus = event.focus

    def _on_compact_requested(self, event: ev.CompactRequested) -> None:
        self._resume_if_idle(event)
        self.compact_requested = True

    def _resume_if_idle(self, event: ev.Event) -> None:
        if self.status != "running":
            self._reset_run(event)

    def _on_stopped(self, event: ev.Stopped) -> None:
        self.status = "stopped"
        self.pending_warnings = []
        self.stop_reason = event.reason
        self.stop_requested = False
        self.wait.reason = None
        self.approvals.pending = []

    def _on_completed(self, event: ev.Completed) -> None:
        self.status = "completed"
        self.pending_warnings = []
        self.summary = event.summary

    def _on_failed(self, event: ev.Failed) -> None:
        self.status = "failed"
        self.pending_warnings = []
        self.error = event.error
        self.stop_reason = event.stop_reason or self.stop_reason
        self.wait.reason = None

    def _on_model_switched(self, event: ev.ModelSwitched) -> None:
        self.model = event.to
        switch = ModelSwitch(
            from_model=event.from_model,
            to=event.to,
            reason=event.reason,
            after_sequence=self.head_sequence,
        )
        self.model_switches.append(switch)

    def _on_trace_titled(self, event: ev.TraceTitled) -> None:
        self.untitled = False
        if event.name:
            self.name = event.name
        self.title_error = event.error

    def _on_experiences_captured(self, event: ev.ExperiencesCaptured) -> None:
        self.captured[event.run] = list(event.ids)

    # helpers -----------------------------------------------------------------

    def _wait(self, reason: WaitReason, detail: str) -> None:
        self.status = "waiting"
        self.wait.begin(reason, detail, self.wait.tool_call_id)

    def _wake(self) -> None:
        self.status = "running"
        self.wait.end()


def _root_title(event: ev.TraceCreated) -> str:
    """The root goal's title: the trace's name, else its first user message's first line."""
    if event.name:
        return event.name[:120]
    for item in event.messages:
        if item.role == "user" and isinstance(item.content, str) and item.content.strip():
            return item.content.strip().splitlines()[0][:120]
    return "the trace's task"


_HANDLERS: dict[type[ev.Event], Any] = {
    ev.TraceCreated: TraceState._on_created,
    ev.RunRequested: TraceState._on_run_requested,
    ev.MessageAppended: TraceState._on_message,
    ev.GoalChanged: TraceState._on_goal_changed,
    ev.LoopWarned: TraceState._on_loop_warned,
    ev.LoopStopped: TraceState._on_loop_stopped,
    ev.Compacted: TraceState._on_compacted,
    ev.VerificationRequested: TraceState._on_verification_requested,
    ev.VerificationPassed: TraceState._on_verification_passed,
    ev.VerificationFailed: TraceState._on_verification_failed,
    ev.Waiting: TraceState._on_waiting,
    ev.HumanReplied: TraceState._on_human_replied,
    ev.BudgetAnswered: TraceState._on_budget_answered,
    ev.ToolDecided: TraceState._on_tool_decided,
    ev.EffectStarted: lambda state, event: state.ledger.start(event),
    ev.EffectResumed: lambda state, event: state.ledger.resume(event),
    ev.ToolResultsPosted: TraceState._on_tool_results,
    ev.FileUploaded: lambda state, event: state.uploads.add(event),
    ev.FilesDelivered: lambda state, event: state.uploads.delivered(event.names),
    ev.ContextRecorded: TraceState._on_context_recorded,
    ev.ExperiencesRecalled: TraceState._on_experiences_recalled,
    ev.TraceTitled: TraceState._on_trace_titled,
    ev.ModelSwitched: TraceState._on_model_switched,
    ev.ExperiencesCaptured: TraceState._on_experiences_captured,
    ev.SubtraceSpawned: TraceState._on_subtrace_spawned,
    ev.SubtraceFinished: TraceState._on_subtrace_finished,
    ev.RemoteSubtraceLinked: lambda state, event: state.children.linked(event),
    ev.MessageReceived: TraceState._on_message_received,
    ev.MessagesRead: lambda state, event: state.mailbox.mark_read(event),
    ev.StopRequested: TraceState._on_stop_requested,
    ev.ReflectRequested: TraceState._on_reflect_requested,
    ev.CompactRequested: TraceState._on_compact_requested,
    ev.Stopped: TraceState._on_stopped,
    ev.Completed: TraceState._on_completed,
    ev.Failed: TraceState._on_failed,
}
"""What each event does (:meth:`TraceState.apply`); one that concerns a single part goes
to it directly."""


def _requires(*allowed: str, what: str) -> Any:
    def check(state: TraceState, event: ev.Event) -> None:
        state._require(*allowed, what=what)

    return check


def _requires_wait(reason: str) -> Any:
    def check(state: TraceState, event: ev.Event) -> None:
        state._require_wait(reason)

    return check


def _requires_idle_or_running(what: str) -> Any:
    """Reflection and compaction also restart a finished trace (:meth:`_resume_if_idle`)."""
    return _requires("running", "completed", "failed", "stopped", what=what)


_CHECKS: dict[type[ev.Event], Any] = {
    ev.TraceCreated: TraceState._check_created,
    ev.RunRequested: TraceState._check_run_requested,
    ev.MessageAppended: TraceState.check_message,
    ev.GoalChanged: TraceState._check_goal_changed,
    ev.LoopWarned: TraceState._check_nothing,
    ev.LoopStopped: TraceState._check_nothing,
    ev.Compacted: TraceState._check_nothing,
    ev.VerificationRequested: _requires("running", what="request verification"),
    ev.VerificationPassed: _requires_wait("verification"),
    ev.VerificationFailed: _requires_wait("verification"),
    ev.Waiting: _requires("running", what="wait"),
    ev.HumanReplied: _requires_wait("human"),
    ev.BudgetAnswered: _requires_wait("budget"),
    ev.ToolDecided: TraceState._check_tool_decided,
    ev.EffectStarted: TraceState._check_effect_started,
    ev.EffectResumed: TraceState._check_effect_resumed,
    ev.ToolResultsPosted: TraceState._check_tool_results,
    ev.FileUploaded: lambda state, event: state.uploads.check(state.trace_id),
    ev.FilesDelivered: TraceState._check_nothing,
    ev.ContextRecorded: TraceState._check_nothing,
    ev.ExperiencesRecalled: TraceState._check_experiences_recalled,
    ev.TraceTitled: TraceState._check_nothing,
    ev.ModelSwitched: _requires("running", what="switch models"),
    ev.ExperiencesCaptured: TraceState._check_nothing,
    ev.SubtraceSpawned: _requires("running", what="spawn a sub-trace"),
    ev.SubtraceFinished: lambda state, event: state.children.check_finished(event),
    ev.RemoteSubtraceLinked: lambda state, event: state.children.check_linked(event),
    ev.MessageReceived: TraceState._check_message_received,
    ev.MessagesRead: lambda state, event: state.mailbox.check_read(event),
    ev.StopRequested: _requires("running", "waiting", what="stop"),
    ev.ReflectRequested: _requires_idle_or_running("reflect"),
    ev.CompactRequested: _requires_idle_or_running("compact"),
    ev.Stopped: _requires("running", "waiting", what="mark stopped"),
    ev.Completed: _requires("running", what="complete"),
    ev.Failed: _requires("running", "waiting", what="fail"),
}
"""The rules of the fold, one per event type (:meth:`TraceState.check`); a rule of a single part
is its own."""
