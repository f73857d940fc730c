"""Names of the JetStream stream, subjects, buckets and the object store.

A ``namespace`` prefixes all of them so several isolated longhaul installations (or tests) can
share one server.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

from longhaul.domain.events import Aggregate


@dataclass(frozen=True)
class Names:
    namespace: str = ""

    def _bucket(self, name: str) -> str:
        return f"{self.namespace}{name}"

    # Cached (the namespace never changes): read for every event appended.
    @cached_property
    def stream(self) -> str:
        return f"{self.namespace.upper()}LH_EVENTS"

    @cached_property
    def subject_root(self) -> str:
        return f"{self.namespace}lh.ev"

    @property
    def live_root(self) -> str:
        return f"{self.namespace}lh.live"

    @property
    def process_exits(self) -> str:
        """Core NATS subject on which a supervisor reports a child's death
        (``longhaul.domain.liveness.ProcessExited`` as JSON), so peers release its leases
        at once."""
        return f"{self.namespace}lh.sys.exited"

    @property
    def imports(self) -> str:
        """Core NATS subject on which the gateway asks an executor to write an imported
        bundle's logs (``longhaul.domain.imports``)."""
        return f"{self.namespace}lh.sys.import"

    @property
    def erasures(self) -> str:
        """Core NATS subject on which the gateway asks the executors to remove an erased
        trace's working directory (``longhaul.domain.erasure``)."""
        return f"{self.namespace}lh.sys.erase"

    @property
    def traces(self) -> str:
        return self._bucket("lh_traces")

    @property
    def active(self) -> str:
        """One key per trace that is not final: what the sweeper looks at (its cost grows
        with the traces under way, not with every trace ever indexed)."""
        return self._bucket("lh_active")

    @property
    def leases(self) -> str:
        return self._bucket("lh_leases")

    @property
    def snapshots(self) -> str:
        return self._bucket("lh_snapshots")

    @property
    def checkpoints(self) -> str:
        return self._bucket("lh_checkpoints")

    @property
    def workspace(self) -> str:
        return self._bucket("lh_workspace")

    @property
    def experiences(self) -> str:
        return self._bucket("lh_experiences")

    @property
    def evals(self) -> str:
        return self._bucket("lh_evals")

    @property
    def notifications(self) -> str:
        """One record per notification delivery, keyed by its delivery id (below the run's
        id, so a run's deliveries are one key pattern)."""
        return self._bucket("lh_notifications")

    @property
    def schedules(self) -> str:
        """Schedules and triggers, per API key (the gateway's: it runs the ticker)."""
        return self._bucket("lh_schedules")

    @property
    def circuits(self) -> str:
        """The circuit breaker's state, one key per model provider (every executor's)."""
        return self._bucket("lh_circuits")

    @property
    def spend(self) -> str:
        """Every key's spend per UTC day (``longhaul.domain.spend``; every executor's)."""
        return self._bucket("lh_spend")

    @property
    def artifacts(self) -> str:
        return self._bucket("lh_artifacts")

    def subject(self, aggregate: Aggregate, aggregate_id: str, event_type: str) -> str:
        return f"{self.subject_root}.{aggregate}.{aggregate_id}.{event_type}"

    def aggregate_filter(self, aggregate: Aggregate, aggregate_id: str) -> str:
        return f"{self.subject_root}.{aggregate}.{aggregate_id}.>"

    def type_filter(self, aggregate: Aggregate, event_type: str) -> str:
        return f"{self.subject_root}.{aggregate}.*.{event_type}"

    def live(self, trace_id: str) -> str:
        return f"{self.live_root}.{trace_id}"

    def parse_subject(self, subject: str) -> tuple[str, str, str]:
        """``(aggregate, aggregate_id, event_type)`` of an event subject."""
        root_parts = self.subject_root.count(".") + 1
        parts = subject.split(".")
        return parts[root_parts], parts[root_parts + 1], parts[root_parts + 2]
