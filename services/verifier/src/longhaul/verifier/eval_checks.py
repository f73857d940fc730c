"""An eval task's ``check``: run in the run's working directory once its trace completes.

The verifier holds the working directories (it runs command checks there) and the client of
an eval may be anywhere, so the check runs here: a durable consumer of ``completed`` events
reads each trace's creation, and for a run of an eval whose task has a ``check`` it runs the
command exactly as a command check (:func:`longhaul.verifier.command_check.run_command`:
the ``bash`` sandbox, the trace's directory the only one it may write, allow-listed
environment, a keeper that survives a verifier crash) and files the outcome in ``lh_evals``
(``longhaul.core.evals``) for ``GET /api/evals/{id}/checks/{trace}``. The command is never
shown to the agent: the run is scored after it ended, not steered.
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

from longhaul.agent.workdir import WorkingDirError
from longhaul.core.consumer import Delivery
from longhaul.core.evals import EvalStore
from longhaul.core.repository import Recorded, Repository
from longhaul.domain import events as ev
from longhaul.domain.evals import CHECK_TIMEOUT_S, CheckOutcome
from longhaul.domain.state import TraceState
from longhaul.verifier.command_check import run_command
from longhaul.verifier.command_spool import discard, spool_for
from longhaul.verifier.handler import Verifier
from longhaul.verifier.spec import CommandCheck

log = logging.getLogger(__name__)


class EvalChecks:
    def __init__(self, traces: Repository[TraceState], evals: EvalStore, verifier: Verifier):
        self.traces = traces
        self.evals = evals
        self.verifier = verifier

    async def _tag(self, trace_id: str) -> ev.EvalTag | None:
        """The eval tag of the trace's creation (its first event: one read)."""
        first = await self.traces.first(trace_id)
        created = first.event if isinstance(first, Recorded) else None
        return created.eval if isinstance(created, ev.TraceCreated) else None

    async def handle(self, delivery: Delivery) -> None:
        if delivery.event_type != "completed":
            return
        tag = await self._tag(delivery.aggregate_id)
        if tag is None or tag.check is None:
            return
        state = await self.traces.load(delivery.aggregate_id)
        spool = spool_for(self.verifier.runs_dir, f"eval.{state.trace_id}")
        outcome = await self.run(state, tag.check, spool)
        await self.evals.put_check(state.owner, tag.eval_id, outcome)
        await asyncio.to_thread(discard, spool)  # once filed: a redelivery reuses the result
        log.info("eval %s check of %s: %s", tag.eval_id, state.trace_id, outcome.passed)

    async def run(self, state: TraceState, command: str, spool: Path) -> CheckOutcome:
        try:
            working_dir = self.verifier.working_dir(state)
        except WorkingDirError as exc:
            return CheckOutcome(trace_id=state.trace_id, passed=False, log=f"check: {exc}")
        result = await run_command(
            CommandCheck(command=command, timeout_s=CHECK_TIMEOUT_S),
            state.summary or "",
            working_dir=working_dir,
            trace_id=state.trace_id,
            spool=spool,
            sandbox=self.verifier.sandbox,
            confined_to_working_dir=bool(state.owner),
        )
        return CheckOutcome(trace_id=state.trace_id, passed=result.passed, log=result.log)
