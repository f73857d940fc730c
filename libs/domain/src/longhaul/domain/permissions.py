"""Who may write what: the event types each service appends, as NATS publish permissions.

The event subject ends in the event type (``lh.ev.<aggregate>.<id>.<type>``), so a NATS user
per service, allowed to publish only its own types, means a leaked or compromised gateway
credential cannot claim that a trace ``completed`` or that verification passed. The table is
checked against the source by ``tests/unit/test_event_writers.py``: an event a service starts
writing must be added here, or the suite fails before NATS would refuse it in production.

The KV buckets and the object store are narrowed the same way (:data:`BUCKET_WRITES`): a
leaked verifier credential cannot take an executor's lease, a gateway one cannot write a
snapshot. What this does not narrow: the JetStream API (``$JS.API.>``), which every service
needs for reads, consumers and provisioning.
"""

from __future__ import annotations

from typing import Literal

from longhaul.domain import events as ev
from longhaul.domain.names import Names

Service = Literal["gateway", "planner", "executor", "verifier", "supervisor", "importer"]
SERVICES: tuple[Service, ...] = (
    "gateway", "planner", "executor", "verifier", "supervisor", "importer"
)  # fmt: skip
"""The NATS users. ``importer`` is no process of its own: it is the executor's second
connection, the one that writes imported logs (``longhaul.executor.imports``), so the
executor's own user is held to the events its turns write."""

IMPORTER: Service = "importer"

# The user an operator (or a test) reads everything with; never given to a service.
ADMIN_USER = "admin"

IMPORTED: tuple[type[ev.Event], ...] = tuple(
    kind
    for kind in vars(ev).values()
    if isinstance(kind, type) and issubclass(kind, ev.TraceEvent) and kind is not ev.TraceEvent
)
"""Every trace event type: what an imported bundle may hold."""

WRITES: dict[Service, tuple[type[ev.Event], ...]] = {
    "gateway": (
        ev.TraceCreated,
        ev.RunRequested,
        ev.HumanReplied,
        ev.BudgetAnswered,
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
        ev.ScheduleFailed,  # a schedule's tick that started nothing (its ticker)
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
        ev.ModelSwitched,
        ev.ExperiencesRecalled,
        ev.TraceTitled,
        ev.ExperiencesCaptured,
        ev.VerificationRequested,
        ev.Waiting,
        ev.FilesDelivered,
        ev.ContextRecorded,
        ev.EffectStarted,
        ev.EffectResumed,
        ev.SubtraceSpawned,
        ev.SubtraceFinished,
        ev.RemoteSubtraceLinked,
        ev.MessageReceived,
        ev.MessagesRead,
        ev.StopRequested,
        ev.HumanReplied,  # a question's deadline passed (``executor.deadlines``)
        ev.ToolDecided,  # an approval's deadline passed
        ev.Stopped,
        ev.Completed,
        ev.Failed,
    ),
    "verifier": (ev.VerificationPassed, ev.VerificationFailed),
    "supervisor": (),
    # an imported log (``longhaul.domain.imports``) holds every kind of trace event; the
    # import writer appends it only to traces that do not exist yet, never a task's
    "importer": IMPORTED,
}

Bucket = Literal[
    "traces",
    "active",
    "leases",
    "snapshots",
    "checkpoints",
    "workspace",
    "experiences",
    "artifacts",
    "evals",
    "notifications",
    "schedules",
    "circuits",
    "spend",
]

BUCKET_WRITES: dict[Service, tuple[Bucket, ...]] = {
    # the index (with its active marks), a key's experiences, uploads and offloaded images,
    # clearing a task's checkpoints, eval runs and their results, notification deliveries
    "gateway": (
        "traces", "active", "experiences", "workspace", "checkpoints", "artifacts", "evals",
        "notifications",
        "schedules",
    ),
    # phase outputs and checkpoints
    "planner": ("workspace", "checkpoints", "artifacts"),
    # the index, leases, snapshots, tool outputs and recorded contexts, experience counts,
    # the providers' circuits, every key's spend per day
    "executor": (
        "traces", "active", "leases", "snapshots", "workspace", "experiences", "artifacts",
        "circuits", "spend",
    ),
    "verifier": ("leases", "evals"),  # its verdict ledger, eval checks' outcomes
    "supervisor": ("leases",),  # the record of a process that died (``longhaul up``)
    "importer": ("traces", "active", "leases"),  # an imported trace's lease and index entry
}  # fmt: skip
"""The KV buckets (and the object store, ``artifacts``) each service writes."""

# Needed by every client: JetStream API requests (reads, consumers, provisioning), acks and
# flow control, request replies.
_COMMON_PUBLISH = ("$JS.API.>", "$JS.ACK.>", "$JS.FC.>", "_INBOX.>")


def event_subjects(names: Names, service: Service) -> list[str]:
    """The event subjects ``service`` may publish, one wildcard per event type it writes."""
    kinds = {(kind.aggregate, kind.__struct_config__.tag) for kind in WRITES[service]}
    return sorted(names.type_filter(aggregate, str(tag)) for aggregate, tag in kinds)


def bucket_subject(names: Names, bucket: Bucket) -> str:
    """The subjects a write to ``bucket`` publishes on."""
    name = getattr(names, bucket)
    return f"$O.{name}.>" if bucket == "artifacts" else f"$KV.{name}.>"


def publish_allow(names: Names, service: Service) -> list[str]:
    """Every subject ``service`` may publish on."""
    buckets = [bucket_subject(names, bucket) for bucket in BUCKET_WRITES[service]]
    subjects = [*_COMMON_PUBLISH, *buckets, *event_subjects(names, service)]
    if service == "executor":
        subjects.append(f"{names.live_root}.>")  # token deltas and status, not persisted
    if service == "supervisor":
        subjects.append(names.process_exits)
    if service == "gateway":
        subjects.append(names.erasures)  # an erased trace's working directory
        subjects.append(names.imports)  # an imported bundle's logs, for an executor to write
    return subjects
