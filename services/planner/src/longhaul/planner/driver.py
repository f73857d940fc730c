"""The task state machine: re-read the task, take the next step, repeat until it waits.

Every wake-up (a new task, a resume request, a step trace ending) calls :meth:`drive`, which
folds the task's log and decides from that state alone, so redeliveries, crashes and several
planner replicas are all harmless: each step saves its events through the task repository
(checked against the fold, appended at its position) without retrying there, because a
conflict means "re-read and take the step again" — models may have been asked, so the whole
step is the decision. One step is one decision:

1. answer a pending resume request (``resumed``);
2. plan a new task (``plan_created``, or ``task_failed`` for an invalid explicit plan); a plan
   proposed for review waits for ``plan_reviewed`` (the gateway's, checked there like a model's
   plan), which the fold turns into the running plan or a cancelled task;
3. settle a running phase whose step traces all ended (``phase_completed`` / ``phase_failed``);
4. recover from failed phases once nothing else runs (``replanned`` or ``task_failed``);
5. finish (``task_completed``) when every phase completed;
6. fail a task whose step traces used up its own ``max_tokens`` / ``max_cost`` (its live step
   traces are asked to stop first; see ``budget``), checked before 3-5;
7. start ready phases while their step traces (one per competitor) fit the budget of
   ``max_concurrent_phases`` running traces (``phase_started``, then their traces).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Collection, Sequence
from dataclasses import dataclass

from longhaul.agent.planning.schema import InvalidPlan
from longhaul.core.checkpoints import Checkpoint, Checkpoints
from longhaul.core.connection import Connection
from longhaul.core.lru import Lru
from longhaul.core.repository import ONCE, ConcurrencyError, Repository
from longhaul.core.workspace import WorkspaceStore
from longhaul.domain import events as ev
from longhaul.domain.config import PipelineConfig
from longhaul.domain.state import TaskState, TraceState
from longhaul.domain.state.trace import FINAL_STATUSES
from longhaul.planner.budget import capped, left, overrun, stop_live_steps, usage
from longhaul.planner.decompose import decompose
from longhaul.planner.merge import Candidate, merge, merge_record
from longhaul.planner.models import PlannerModels
from longhaul.planner.offload import phase_output_key, store_output, summarise, task_output_key
from longhaul.planner.outcomes import step_outcome, task_id_of_trace, trace_status
from longhaul.planner.replan import (
    SINGLE_AGENT_ID,
    FailureReport,
    completed_ids,
    reflect,
    replan,
    single_agent_phase,
)
from longhaul.planner.resume import resume_events
from longhaul.planner.steps import (
    Budget,
    competitors,
    ensure_step_trace,
    step_trace_created,
    step_trace_ids,
)

log = logging.getLogger(__name__)

MAX_STEPS_PER_WAKE = 1000
REMEMBERED_TRACES = 4096


@dataclass
class PlannerDeps:
    conn: Connection
    traces: Repository[TraceState]
    tasks: Repository[TaskState]
    """Cached (``longhaul.core.service``): the planner keeps coming back to the same tasks."""
    workspace: WorkspaceStore
    checkpoints: Checkpoints
    models: PlannerModels
    pipeline: PipelineConfig
    presets: Collection[str]
    tools: Collection[str]


class TaskDriver:
    def __init__(self, deps: PlannerDeps) -> None:
        self.deps = deps
        self.traces = deps.traces
        self.pipeline = deps.pipeline
        self.tasks = deps.tasks
        self.step_tasks: Lru[str, str] = Lru(REMEMBERED_TRACES)
        """Step trace id -> task id, for the traces this replica created."""

    async def task_of_step(self, trace_id: str) -> str | None:
        """The task a trace runs a phase of (``None`` for other traces)."""
        return self.step_tasks.get(trace_id) or await task_id_of_trace(self.deps.traces, trace_id)

    async def drive(self, task_id: str, *, ended: str | None = None) -> None:
        """Run the task's steps until it waits. Callers serialise calls per task. ``ended``
        is a step trace whose final event caused this call (no need to ask its status)."""
        task = await self.tasks.load(task_id)
        for _ in range(MAX_STEPS_PER_WAKE):
            try:
                if not await self.step(task, ended=ended):
                    break
            except ConcurrencyError:
                log.info("task %s moved under us; re-reading", task_id)
                task = await self.tasks.load(task_id)
        else:
            log.error(
                "task %s still busy after %d steps; leaving it for the next wake-up",
                task_id,
                MAX_STEPS_PER_WAKE,
            )
        if task.is_final:
            self.tasks.forget(task_id)

    async def step(self, task: TaskState, *, ended: str | None = None) -> bool:
        """Take one step; False when the task waits for something outside the planner."""
        if not task.exists:
            return False
        if task.resumes > task.resumes_handled and task.status in ("planning", "running"):
            events = await resume_events(task, self.deps.checkpoints)
            await self._append(task, events)
            answer = events[-1]
            assert isinstance(answer, ev.Resumed)
            log.info(
                "task %s resumed from %s: skipped %s, continuing at %s",
                task.task_id,
                answer.source,
                answer.skipped,
                answer.resumed_at,
            )
            return True
        if task.is_final:
            return False
        if task.status == "planning":
            await self._plan(task)
            return True
        if task.status == "awaiting_review":
            return False  # a plan_reviewed event wakes it
        if capped(task):
            reason = overrun(task, await usage(self.traces, task))
            if reason:
                await stop_live_steps(self.traces, task)
                await self._append(task, [ev.TaskFailed(error=reason)])
                return True
        for phase_id in task.running_phases():
            if await self._record_phase_outcome(task, phase_id, ended):
                return True
        if task.failed_phases():
            if task.running_phases():
                return False
            await self._recover(task)
            return True
        if task.all_completed():
            await self._complete(task)
            return True
        return await self._start_ready(task)

    async def _budget(self, task: TaskState) -> Budget:
        return left(task, await usage(self.traces, task)) if capped(task) else (None, None)

    async def _append(self, task: TaskState, events: Sequence[ev.TaskEvent]) -> None:
        """Save the step's events after the state ``task`` shows, each checked against the
        fold first (an event the fold refuses must never reach the log, where it would make
        the task unreadable), and fold them into it."""
        await self.tasks.save(task.task_id, task, lambda _: events, actor="planner", retry=ONCE)

    # ---------------------------------------------------------------- planning

    async def _plan(self, task: TaskState) -> None:
        try:
            plan = await decompose(
                task.goal,
                task.options,
                mode=task.mode,
                model=self.deps.models.planner(),
                max_phases=self.pipeline.max_phases,
                presets=self.deps.presets,
                tools=self.deps.tools,
                checker=self.deps.models.utility() if self.pipeline.plan_model_check else None,
                example=self.pipeline.plan_worked_example,
            )
        except InvalidPlan as exc:
            await self._append(task, [ev.TaskFailed(error=f"invalid plan: {exc}")])
            return
        if plan.note:
            log.info("task %s planned by %s: %s", task.task_id, plan.source, plan.note)
        review = self.pipeline.plan_review if task.review is None else task.review
        await self._append(
            task, [ev.PlanCreated(phases=plan.phases, source=plan.source, review=review)]
        )

    # ---------------------------------------------------------------- scheduling

    def _fitting(self, task: TaskState) -> list[str]:
        """Ready phases, in plan order, whose step traces fit the budget of running traces
        (``max_concurrent_phases``): each competitor of a phase is one trace. A phase with more
        competitors than the whole budget starts alone, once nothing else runs."""
        budget = self.pipeline.max_concurrent_phases
        used = sum(len(task.phases[pid].trace_ids) for pid in task.running_phases())
        chosen: list[str] = []
        for pid in task.ready_phases():
            cost = len(competitors(task.phases[pid].spec))
            if used + cost > budget and (used or chosen):
                break
            chosen.append(pid)
            used += cost
        return chosen

    async def _start_ready(self, task: TaskState) -> bool:
        ready = self._fitting(task)
        if not ready:
            return False
        started = {
            pid: step_trace_ids(task, task.phases[pid].spec, task.phases[pid].attempts + 1)
            for pid in ready
        }
        await self._append(
            task,
            [
                ev.PhaseStarted(phase_id=pid, trace_ids=ids, attempt=task.phases[pid].attempts + 1)
                for pid, ids in started.items()
            ],
        )
        budget = await self._budget(task)
        for pid, ids in started.items():
            for index, trace_id in enumerate(ids):
                self.step_tasks.put(trace_id, task.task_id)
                created = step_trace_created(task, task.phases[pid].spec, index, budget)
                await ensure_step_trace(self.traces, trace_id, created)
        return True

    async def _record_phase_outcome(
        self, task: TaskState, phase_id: str, ended: str | None
    ) -> bool:
        """Record the phase's result once all its step traces ended; False while they run."""
        phase = task.phases[phase_id]
        live = False
        for index, trace_id in enumerate(phase.trace_ids):
            if trace_id == ended:
                continue  # its outcome below tells its status (even if it was rerun since)
            status = await trace_status(self.deps.traces, trace_id)
            if status is None:  # the planner died between phase_started and trace_created
                created = step_trace_created(task, phase.spec, index, await self._budget(task))
                await ensure_step_trace(self.traces, trace_id, created)
            live = live or status in (None, "running")
        if live:
            return False
        outcomes = [await step_outcome(self.traces, tid) for tid in phase.trace_ids]
        if any(o.status not in FINAL_STATUSES for o in outcomes):
            return False
        labels = [
            str(c.get("name") or c.get("model") or c.get("preset") or f"#{n}")
            for n, c in enumerate(competitors(phase.spec), 1)
        ]
        candidates = [
            Candidate(
                label=label,
                trace_id=o.trace_id,
                output=o.output,
                model=competitors(phase.spec)[n].get("model"),
            )
            for n, (label, o) in enumerate(zip(labels, outcomes, strict=True))
            if o.status == "completed"
        ]
        if not candidates:
            error = "; ".join(f"{o.trace_id} {o.status}: {o.error or 'no error'}" for o in outcomes)
            await self._append(task, [ev.PhaseFailed(phase_id=phase_id, error=error)])
            return True
        result = await merge(phase.spec.merge, phase.spec, candidates, self.deps.models)
        key = phase_output_key(task.task_id, phase_id)
        output = await store_output(self.deps.workspace, key, result.output)
        summary = summarise(output)
        checkpoint = Checkpoint(
            task_id=task.task_id,
            phase_id=phase_id,
            name=phase.spec.name,
            result_ref=key,
            summary=summary,
            trace_id=result.trace_id,
            task_status=task.status or "running",
        )
        completed = ev.PhaseCompleted(
            phase_id=phase_id,
            output_ref=key,
            summary=summary,
            trace_id=result.trace_id,
            merge=merge_record(
                phase.spec.merge,
                [(label, o.trace_id, o.status) for label, o in zip(labels, outcomes, strict=True)],
                result,
            )
            if phase.spec.competitors
            else None,
        )
        # Either record alone is enough for resume (see resume.py), so they go out together.
        results = await asyncio.gather(
            self.deps.checkpoints.save(checkpoint),
            self._append(task, [completed]),
            return_exceptions=True,
        )
        for outcome in results:
            if isinstance(outcome, BaseException):
                raise outcome
        return True

    # ---------------------------------------------------------------- failure

    async def _recover(self, task: TaskState) -> None:
        reports = []
        for pid in task.failed_phases():
            phase = task.phases[pid]
            tails = [
                (await step_outcome(self.traces, tid)).transcript_tail
                for tid in phase.trace_ids[:1]
            ]
            reports.append(FailureReport(pid, phase.spec.name, phase.error, "".join(tails)))
        model = self.deps.models.planner()
        reflection, conversation = await reflect(task, reports, model)
        kept = completed_ids(task)
        if len(task.replans) < self.pipeline.max_replan_attempts:
            plan = await replan(
                task,
                reflection,
                conversation,
                model,
                max_phases=self.pipeline.max_phases,
                presets=self.deps.presets,
                tools=self.deps.tools,
            )
            log.info("task %s replanned by %s", task.task_id, plan.source)
            event: ev.TaskEvent = ev.Replanned(
                reflection=reflection, phases=plan.phases, kept=plan.kept
            )
        elif self.pipeline.single_agent_fallback and SINGLE_AGENT_ID not in task.phases:
            event = ev.Replanned(
                reflection=reflection, phases=[single_agent_phase(task, reflection)], kept=kept
            )
        else:
            failed = ", ".join(task.failed_phases())
            event = ev.TaskFailed(
                error=f"phase {failed} failed after {len(task.replans)} replans",
                reflections=[*task.replans, reflection],
            )
        await self._append(task, [event])

    # ---------------------------------------------------------------- completion

    async def _complete(self, task: TaskState) -> None:
        needed = {dep for pid in task.order for dep in task.phases[pid].spec.depends_on}
        sinks = [pid for pid in task.order if pid not in needed]
        parts = []
        for pid in sinks:
            entry = await self.deps.workspace.get(task.phases[pid].output_ref)
            text = entry.value.decode(errors="replace") if entry else task.phases[pid].summary
            parts.append(text if len(sinks) == 1 else f"## {task.phases[pid].spec.name}\n{text}")
        output = await store_output(
            self.deps.workspace, task_output_key(task.task_id), "\n\n".join(parts)
        )
        await self._append(task, [ev.TaskCompleted(summary=summarise(output))])
