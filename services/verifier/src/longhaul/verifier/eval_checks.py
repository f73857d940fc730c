"""An eval task's ``check``: run in the run's working directory once its trace completes.

The verifier holds the working directories (it runs command checks there) and the client of
an eval may be anywhere, so the check runs here: a durable consumer of ``completed`` events
reads each trace's creation, and for a run of an eval whose task has a ``check`` it runs the
command exactly as a command check (:func:`longhaul.verifier.command_check.run_command`:
the ``bash`` sandbox, the trace's directory the only one it may write, allow-listed
environment, a keeper that survives a verifier crash) and files the outcome in ``lh_evals``
(``longhaul.core.evals``) for ``GET /api/evals/{id}/checks/{trace}``. The command is never
shown to the agent: the run is scored after it ended, not steered.

The task's library checks (``checks``: contains, equals, regex, JSON schema, a graded rubric)
run here too, on the final answer, and each verdict is filed with the outcome: a client's
regex runs on RE2 (linear time), a rubric on its own model or the verifier's.
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any

from longhaul.agent.workdir import WorkingDirError
from longhaul.core.consumer import Delivery
from longhaul.core.evals import EvalStore
from longhaul.core.repository import Recorded, Repository
from longhaul.domain import events as ev
from longhaul.domain.evals import CHECK_TIMEOUT_S, Check, CheckOutcome, CheckVerdict, check_text
from longhaul.domain.state import TraceState
from longhaul.llm.untrusted_schema import UntrustedSchemaError, search
from longhaul.verifier.command_check import run_command
from longhaul.verifier.command_spool import discard, spool_for
from longhaul.verifier.handler import Verifier
from longhaul.verifier.result import CheckResult
from longhaul.verifier.schema_check import check_schema
from longhaul.verifier.spec import CommandCheck, JudgeCheck

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
        if tag is None or (tag.check is None and not tag.checks):
            return
        state = await self.traces.load(delivery.aggregate_id)
        spool = spool_for(self.verifier.runs_dir, f"eval.{state.trace_id}")
        if tag.check is not None:
            outcome = await self.run(state, tag.check, spool)
        else:
            outcome = CheckOutcome(trace_id=state.trace_id, passed=True)
        outcome.checks = [await self.verdict(state, raw) for raw in tag.checks]
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

    async def verdict(self, state: TraceState, raw: dict[str, Any]) -> CheckVerdict:
        """What one library check says of the run's final answer."""
        try:
            check = Check.model_validate(raw)
        except ValueError as exc:  # pydantic's; the gateway validated it, so a foreign record
            return CheckVerdict(check=str(raw.get("type")), passed=False, detail=str(exc))
        answer = state.summary or ""
        simple = check_text(check, answer)
        if simple is not None:
            return simple
        if check.type == "regex" and isinstance(check.value, str):
            pattern = f"(?i){check.value}" if check.ignore_case else check.value
            try:
                found = search(pattern, answer)
            except UntrustedSchemaError as exc:
                return CheckVerdict(check=check.label(), passed=False, detail=str(exc))
            detail = "" if found else f"the answer does not match {check.value!r}"
            return CheckVerdict(check=check.label(), passed=found, detail=detail)
        if check.type == "json_schema" and isinstance(check.value, dict):
            result = check_schema(answer, check.value)
        else:
            judge = JudgeCheck(
                criteria=check.criteria, model=check.model, pass_score=check.pass_score
            )
            result = await self.verifier.judge(judge, answer, state)
        return _verdict(check, result)


def _verdict(check: Check, result: CheckResult) -> CheckVerdict:
    """A check's verdict with the grader's scores (a rubric) or its errors as the detail."""
    detail = result.log if check.type == "rubric" or result.passed else "; ".join(result.errors)
    return CheckVerdict(
        check=check.label(), passed=result.passed, detail=detail[-2000:], skipped=result.skipped
    )
