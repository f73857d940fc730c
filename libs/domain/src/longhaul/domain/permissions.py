"""Who may write what: the event types each service appends, as NATS publish permissions.

The event subject ends in the event type (``lh.ev.<aggregate>.<id>.<type>``), so a NATS user
per service, allowed to publish only its own types, means a leaked or compromised gateway
credential cannot claim that a trace ``completed`` or that verification passed. The table is
checked against the source by ``tests/unit/test_event_writers.py``: an event a service starts
writing must be added here, or the suite fails before NATS would refuse it in production.

What this does not narrow: the JetStream API, KV and object-store subjects, which every
service needs for reads, consumers, leases, snapshots and artifacts.
"""

from __future__ import annotations

from typing import Literal

from longhaul.domain import events as ev
from longhaul.domain.names import Names

Service = Literal["gateway", "planner", "executor", "verifier", "supervisor"]
SERVICES: tuple[Service, ...] = ("gateway", "planner", "executor", "verifier", "supervisor")

# The user an operator (or a test) reads everything with; never given to a service.
ADMIN_USER = "admin"

WRITES: dict[Service, tuple[type[ev.Event], ...]] = {
    "gateway": (
        ev.TraceCreated,
        ev.RunRequested,
        ev.HumanReplied,
        ev.ToolDecided,
        ev.ToolResultsPosted,
        ev.FileUploaded,
        ev.MessageReceived,
        ev.StopRequested,
        ev.ReflectRequested,
        ev.CompactRequested,
        ev.TaskCreated,
        ev.PlanReviewed,
        ev.ResumeRequested,
    ),
    "planner": (
        ev.TraceCreated,
        ev.PlanCreated,
        ev.PhaseStarted,
        ev.PhaseCompleted,
        ev.PhaseFailed,
        ev.Replanned,
        ev.TaskCompleted,
        ev.TaskFailed,
        ev.Resumed,
        ev.StopRequested,  # a step trace of a task that ran over its max_tokens / max_cost
    ),
    # The executor runs the agent loop (libs/agent), which decides most trace events.
    "executor": (
        ev.TraceCreated,
        ev.RunRequested,
        ev.MessageAppended,
        ev.GoalChanged,
        ev.LoopWarned,
        ev.LoopStopped,
        ev.Compacted,
        ev.ExperiencesRecalled,
        ev.VerificationRequested,
        ev.Waiting,
        ev.FilesDelivered,
        ev.ContextRecorded,
        ev.SubtraceSpawned,
        ev.SubtraceFinished,
        ev.RemoteSubtraceLinked,
        ev.MessageReceived,
        ev.MessagesRead,
        ev.StopRequested,
        ev.Stopped,
        ev.Completed,
        ev.Failed,
    ),
    "verifier": (ev.VerificationPassed, ev.VerificationFailed),
    "supervisor": (),
}

# Needed by every client: JetStream API requests (reads, consumers, provisioning), acks and
# flow control, request replies, KV (index, leases, snapshots, checkpoints) and the object store.
_COMMON_PUBLISH = ("$JS.API.>", "$JS.ACK.>", "$JS.FC.>", "_INBOX.>", "$KV.>", "$O.>")


def event_subjects(names: Names, service: Service) -> list[str]:
    """The event subjects ``service`` may publish, one wildcard per event type it writes."""
    kinds = {(kind.aggregate, kind.__struct_config__.tag) for kind in WRITES[service]}
    return sorted(names.type_filter(aggregate, str(tag)) for aggregate, tag in kinds)


def publish_allow(names: Names, service: Service) -> list[str]:
    """Every subject ``service`` may publish on."""
    subjects = [*_COMMON_PUBLISH, *event_subjects(names, service)]
    if service == "executor":
        subjects.append(f"{names.live_root}.>")  # token deltas and status, not persisted
    if service == "supervisor":
        subjects.append(names.process_exits)
    return subjects
