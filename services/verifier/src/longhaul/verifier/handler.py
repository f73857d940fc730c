"""Answer ``verification_requested`` events with ``verification_passed`` / ``_failed``.

The delivered event is only a wake-up: the trace is re-read, and a request that is no longer
awaited (answered already by this or another replica, superseded by a new run or a newer
request, or the trace stopped) is acknowledged without a second answer. The answer is saved
through the trace repository (checked against the fold, appended at its position, re-decided
on conflict), so two replicas racing on a redelivered request cannot both answer it. With a
ledger (``longhaul.verifier.ledger``) the checks themselves run once per request: a redelivery
finds the running claim or the recorded verdict by the request's key; a command check whose
verifier died mid-run is found still running, or finished, by its keeper
(``longhaul.verifier.command_spool``) and never started twice.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine
from pathlib import Path
from typing import Any

from longhaul.agent.tools.sandbox import Sandbox
from longhaul.agent.workdir import WorkingDirError, trace_working_dir
from longhaul.core.config import LonghaulConfig
from longhaul.core.consumer import Delivery
from longhaul.core.repository import Repository
from longhaul.domain import events as ev
from longhaul.domain.messages import content_text
from longhaul.domain.state import TraceState
from longhaul.llm.registry import ModelRegistry
from longhaul.verifier.command_check import run_command
from longhaul.verifier.command_spool import discard, spool_for
from longhaul.verifier.judge_check import run_judge
from longhaul.verifier.ledger import VerdictLedger
from longhaul.verifier.result import CheckResult, Verdict, combine
from longhaul.verifier.schema_check import check_schema
from longhaul.verifier.spec import InvalidVerificationConfig, JudgeCheck, parse_spec

log = logging.getLogger(__name__)

_SUPERSEDING = (
    ev.RunRequested,
    ev.VerificationRequested,
    ev.VerificationPassed,
    ev.VerificationFailed,
)


def awaiting(state: TraceState, attempt: int) -> bool:
    """True while the trace waits for the verdict on ``attempt``."""
    return (
        state.status == "waiting"
        and state.wait_reason == "verification"
        and state.verification.pending
        and state.verification.attempts == attempt
    )


def request_key(state: TraceState, request: ev.VerificationRequested) -> str:
    """Names one verification request across redeliveries and replicas."""
    return f"verify.{state.trace_id}.{request.attempt}"


def runs_dir(config: LonghaulConfig) -> Path:
    """Where the keepers of verification commands leave their results."""
    return (config.data_dir / "verifier-runs").resolve()


class Verifier:
    def __init__(
        self,
        traces: Repository[TraceState],
        models: ModelRegistry,
        config: LonghaulConfig,
        ledger: VerdictLedger | None = None,
    ) -> None:
        self.traces = traces
        self.models = models
        self.config = config
        self.ledger = ledger
        self.sandbox = Sandbox(config.sandbox)
        self.runs_dir = runs_dir(config)

    async def handle(self, delivery: Delivery) -> None:
        if delivery.event_type != "verification_requested":
            return
        try:
            request = ev.decode(delivery.data)
        except ev.EventDecodeError as exc:
            log.warning("ignoring undecodable request on %s: %s", delivery.aggregate_id, exc)
            return
        if not isinstance(request, ev.VerificationRequested):
            return
        state = await self._awaiting_state(delivery, request)
        if state is None:
            log.info("verification %s/%d already settled", delivery.aggregate_id, request.attempt)
            return
        key = request_key(state, request)
        if self.ledger is None:
            verdict = await self.verify(state, request)
        else:
            verdict = await self.ledger.once(key, lambda: self.verify(state, request))
        answer: ev.TraceEvent = (
            ev.VerificationPassed(attempt=request.attempt, log=verdict.log)
            if verdict.passed
            else ev.VerificationFailed(
                attempt=request.attempt, errors=verdict.errors, log=verdict.log
            )
        )
        await self._append(state, request, answer)
        await asyncio.to_thread(discard, spool_for(self.runs_dir, key))

    async def _awaiting_state(
        self, delivery: Delivery, request: ev.VerificationRequested
    ) -> TraceState | None:
        state = await self.traces.load(delivery.aggregate_id)
        if not awaiting(state, request.attempt):
            return None
        async for later in self.traces.replay(state.trace_id, after=delivery.stream_seq):
            if isinstance(later.event, _SUPERSEDING):
                return None
        return state

    async def _append(
        self, state: TraceState, request: ev.VerificationRequested, answer: ev.TraceEvent
    ) -> None:
        def decide(current: TraceState) -> list[ev.Event]:
            return [answer] if awaiting(current, request.attempt) else []

        written = await self.traces.save(
            state.trace_id,
            state,
            decide,
            actor="verifier",
            causation_id=request.id,
            correlation_id=request.correlation_id,
        )
        if written:
            log.info("verification %s/%d: %s", state.trace_id, request.attempt, answer.type)

    async def verify(self, state: TraceState, request: ev.VerificationRequested) -> Verdict:
        """Run every check the config asks for; a config that cannot run fails verification."""
        config = request.method if request.method is not None else state.config.verification
        try:
            spec = parse_spec(config, self.config.verifier.commands)
        except InvalidVerificationConfig as exc:
            message = f"invalid verification config: {exc}"
            return Verdict(passed=False, errors=[message], log=message)
        answer = request.answer or content_text(
            getattr(state.messages.get(request.answer_sequence), "content", None)
        )
        results: list[CheckResult] = []
        if spec.json_schema is not None:
            results.append(check_schema(answer, spec.json_schema))
        slow: list[Coroutine[Any, Any, CheckResult]] = []
        if spec.command is not None:
            try:
                working_dir = self.working_dir(state)
            except WorkingDirError as exc:
                message = f"command: {exc}"
                return Verdict(passed=False, errors=[message], log=message)
            slow.append(
                run_command(
                    spec.command,
                    answer,
                    working_dir=working_dir,
                    trace_id=state.trace_id,
                    spool=spool_for(self.runs_dir, request_key(state, request)),
                    sandbox=self.sandbox,
                    confined_to_working_dir=bool(state.owner),
                )
            )
        if spec.judge is not None:
            slow.append(self.judge(spec.judge, answer, state))
        results += await asyncio.gather(*slow)
        return combine(results)

    def working_dir(self, state: TraceState) -> str:
        """The trace's own working directory, as the executor places it: in its key's
        directory below the working root, or ``unowned/<scope>`` for a trace with no owner
        (never the configured directory itself, which is not where its agent worked)."""
        root = self.config.working_root or Path.cwd()
        return str(trace_working_dir(root, state, state.config.working_dir))

    async def judge(self, check: JudgeCheck, answer: str, state: TraceState) -> CheckResult:
        model_string = check.model or self.config.models.for_role("verifier")
        try:
            model = self.models.resolve(model_string)
        except ValueError as exc:
            message = f"judge model {model_string} unavailable: {exc}"
            return CheckResult("judge", passed=False, errors=[message], log=message)
        task = next((content_text(m.content) for m in state.main_path() if m.role == "user"), "")
        return await run_judge(check, answer, model=model, task=task)
