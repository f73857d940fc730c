"""``TaskState``: the fold of one task's events (a plan of phases forming a DAG)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any, ClassVar

import msgspec
from longhaul.domain import events as ev
from longhaul.domain.events import MergeRecord, PhaseSpec, PhaseStatus, TaskStatus
from longhaul.domain.state.errors import InvalidTransition
from longhaul.domain.state.faults import Fault


def validate_phase_graph(phases: Iterable[PhaseSpec], *, max_phases: int | None = None) -> None:
    """Raise :class:`InvalidTransition` for duplicate ids, unknown dependencies or cycles."""
    specs = list(phases)
    if not specs:
        raise InvalidTransition("a plan needs at least one phase", code="invalid_plan")
    if max_phases is not None and len(specs) > max_phases:
        raise InvalidTransition(
            f"plan has {len(specs)} phases, at most {max_phases} allowed", code="invalid_plan"
        )
    ids = [spec.id for spec in specs]
    if len(set(ids)) != len(ids):
        raise InvalidTransition("phase ids must be unique", code="invalid_plan")
    known = set(ids)
    for spec in specs:
        unknown = [dep for dep in spec.depends_on if dep not in known]
        if unknown:
            raise InvalidTransition(
                f"phase {spec.id} depends on unknown {', '.join(unknown)}", code="invalid_plan"
            )
    topological_layers(specs)


def topological_layers(specs: list[PhaseSpec]) -> list[list[str]]:
    """Phases grouped by depth (Kahn's algorithm); raises on a cycle."""
    remaining = {spec.id: set(spec.depends_on) for spec in specs}
    layers: list[list[str]] = []
    while remaining:
        ready = sorted(pid for pid, deps in remaining.items() if not deps)
        if not ready:
            raise InvalidTransition(
                f"dependency cycle among {', '.join(sorted(remaining))}", code="invalid_plan"
            )
        layers.append(ready)
        for pid in ready:
            del remaining[pid]
        for deps in remaining.values():
            deps.difference_update(ready)
    return layers


class PhaseState(msgspec.Struct, kw_only=True):
    spec: PhaseSpec
    status: PhaseStatus = "pending"
    trace_ids: list[str] = msgspec.field(default_factory=list)
    attempts: int = 0
    summary: str = ""
    output_ref: str = ""
    error: str = ""
    merge: MergeRecord | None = None


class TaskState(msgspec.Struct, kw_only=True):
    SCHEMA: ClassVar[int] = 1
    """The shape of this fold: a snapshot of another shape is not read (``snapshots``)."""
    UPGRADES: ClassVar[Mapping[int, Callable[[dict[str, Any]], dict[str, Any]]]] = {}

    task_id: str = ""
    status: TaskStatus | None = None
    goal: str = ""
    mode: str = "plan"
    options: dict[str, object] = msgspec.field(default_factory=dict)
    review: bool | None = None
    """Asked for with the task; ``None``: the planner's configured default."""
    review_reason: str = ""
    """What the reviewer said (with an edit or a refusal)."""
    route: ev.RouteDecision | None = None
    schedule_id: str | None = None
    trigger_id: str | None = None
    max_tokens: int | None = None
    max_cost: float | None = None
    step_traces: list[str] = msgspec.field(default_factory=list)
    """Every step trace any plan started, in order: what the task's caps count."""
    owner: str | None = None
    phases: dict[str, PhaseState] = msgspec.field(default_factory=dict)
    order: list[str] = msgspec.field(default_factory=list)
    plan_source: str = ""
    replans: list[str] = msgspec.field(default_factory=list)
    resumes: int = 0
    resumes_handled: int = 0
    """``resumed`` answers recorded; fewer than ``resumes`` means a resume is pending."""
    resume_source: str = ""
    summary: str = ""
    error: str = ""
    created_at: float = 0.0
    updated_at: float = 0.0
    faults: list[Fault] = msgspec.field(default_factory=list)
    """Events of the log this fold skipped (see ``faults``)."""
    version: int = 0
    stream_seq: int = 0

    @property
    def exists(self) -> bool:
        return self.status is not None

    @property
    def is_final(self) -> bool:
        return self.status in ("completed", "failed", "cancelled")

    def ready_phases(self) -> list[str]:
        """Pending phases whose dependencies all completed, in plan order."""
        return [
            pid
            for pid in self.order
            if self.phases[pid].status == "pending"
            and all(
                self.phases[dep].status == "completed" for dep in self.phases[pid].spec.depends_on
            )
        ]

    def running_phases(self) -> list[str]:
        return [pid for pid in self.order if self.phases[pid].status == "running"]

    def failed_phases(self) -> list[str]:
        return [pid for pid in self.order if self.phases[pid].status == "failed"]

    def all_completed(self) -> bool:
        return bool(self.order) and all(
            self.phases[pid].status in ("completed", "skipped") for pid in self.order
        )

    def layers(self) -> list[list[str]]:
        return topological_layers([self.phases[pid].spec for pid in self.order])

    def check(self, event: ev.Event) -> None:
        """Raise :class:`InvalidTransition` if ``event`` could not apply; changes nothing."""
        if not self.exists and not isinstance(event, ev.TaskCreated):
            raise InvalidTransition(f"task {event.aggregate_id} does not exist", code="not_found")
        if event.aggregate_id and self.task_id and event.aggregate_id != self.task_id:
            # Stored on this task's subject but naming another: forged or misrouted.
            raise InvalidTransition(
                f"event of {event.aggregate_id} in task {self.task_id}", code="wrong_aggregate"
            )
        match event:
            case ev.TaskCreated():
                if self.exists:
                    raise InvalidTransition("task already exists", code="conflict")
            case ev.PlanCreated():
                self._require("planning", what="create a plan")
                validate_phase_graph(event.phases)
            case ev.PlanReviewed():
                self._require("awaiting_review", what="review the plan")
                if event.phases is not None:
                    if not event.approved:
                        raise InvalidTransition(
                            "a refused plan carries no phases", code="invalid_plan"
                        )
                    validate_phase_graph(event.phases)
            case ev.PhaseStarted():
                self._phase(event.phase_id, "pending", "failed", "running")
            case ev.PhaseCompleted():
                self._phase(event.phase_id, "running")
            case ev.PhaseFailed():
                self._phase(event.phase_id, "running", "pending")
            case ev.Replanned():
                self._require("running", what="replan")
                kept = [self.phases[pid].spec for pid in event.kept if pid in self.phases]
                validate_phase_graph([*kept, *event.phases])
            case ev.TaskCompleted():
                self._require("running", what="complete")
            case ev.TaskFailed():
                self._require("planning", "running", what="fail")
            case ev.ResumeRequested():
                self._require("planning", "running", "failed", what="resume")
            case ev.Resumed():
                self._require("planning", "running", what="record a resume")
            case _:
                raise InvalidTransition(f"{event.type} is not a task event", code="wrong_aggregate")

    def apply(self, event: ev.Event, stream_seq: int = 0) -> None:
        """Apply one event; raises :class:`InvalidTransition` (from :meth:`check`) if it
        cannot happen."""
        self.check(event)
        match event:
            case ev.TaskCreated():
                self.task_id = event.aggregate_id
                self.status = "planning"
                self.goal = event.goal
                self.mode = event.mode
                self.options = event.options
                self.owner = event.owner
                self.review = event.review
                self.route = event.route
                self.schedule_id = event.schedule_id
                self.trigger_id = event.trigger_id
                self.max_tokens = event.max_tokens
                self.max_cost = event.max_cost
                self.created_at = event.ts
            case ev.PlanCreated():
                self._set_phases(event.phases)
                self.plan_source = event.source
                self.status = "awaiting_review" if event.review else "running"
            case ev.PlanReviewed():
                self.review_reason = event.reason
                if not event.approved:
                    self.status = "cancelled"
                    self.error = f"plan refused: {event.reason or 'no reason given'}"
                else:
                    if event.phases is not None:
                        self._set_phases(event.phases)
                        self.plan_source = "review"
                    self.status = "running"
            case ev.PhaseStarted():
                phase = self.phases[event.phase_id]
                phase.status = "running"
                phase.trace_ids = list(event.trace_ids)
                self.step_traces += [t for t in event.trace_ids if t not in self.step_traces]
                phase.attempts = event.attempt
            case ev.PhaseCompleted():
                phase = self.phases[event.phase_id]
                phase.status = "completed"
                phase.summary = event.summary
                phase.output_ref = event.output_ref
                phase.merge = event.merge
            case ev.PhaseFailed():
                phase = self.phases[event.phase_id]
                phase.status = "failed"
                phase.error = event.error
            case ev.Replanned():
                kept = {pid: self.phases[pid] for pid in event.kept if pid in self.phases}
                self.phases = kept
                self.order = list(kept)
                self._set_phases(event.phases, keep_existing=True)
                self.replans.append(event.reflection)
            case ev.TaskCompleted():
                self.status = "completed"
                self.summary = event.summary
            case ev.TaskFailed():
                self.status = "failed"
                self.error = event.error
            case ev.ResumeRequested():
                self.resumes += 1
                if self.status == "failed":
                    self.status = "running" if self.order else "planning"
                    self.error = ""
                    for pid in self.failed_phases():
                        self.phases[pid].status = "pending"
            case ev.Resumed():
                self.resumes_handled += 1
                self.resume_source = event.source
        self.version = event.n or self.version + 1
        if stream_seq:
            self.stream_seq = stream_seq
        self.updated_at = event.ts

    def _set_phases(self, specs: list[PhaseSpec], *, keep_existing: bool = False) -> None:
        if not keep_existing:
            self.phases = {}
            self.order = []
        for spec in specs:
            self.phases[spec.id] = PhaseState(spec=spec)
            self.order.append(spec.id)

    def _phase(self, phase_id: str, *allowed: str) -> PhaseState:
        self._require("running", what=f"change phase {phase_id}")
        phase = self.phases.get(phase_id)
        if phase is None:
            raise InvalidTransition(f"unknown phase {phase_id}", code="not_found")
        if phase.status not in allowed:
            raise InvalidTransition(
                f"phase {phase_id} is {phase.status}, expected {' or '.join(allowed)}",
                code="conflict",
            )
        return phase

    def _require(self, *allowed: str, what: str) -> None:
        if self.status not in allowed:
            raise InvalidTransition(
                f"cannot {what}: task {self.task_id} is {self.status}", code="conflict"
            )
