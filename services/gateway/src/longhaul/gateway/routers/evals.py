"""``/api/evals``: eval runs — a suite of tasks run against models, each run a normal trace
tagged with the eval's id (``longhaul eval``; ``longhaul.domain.evals``).

The gateway keeps the eval (suite, models, repeats) and every scored run in ``lh_evals``
below the caller's owner (``longhaul.core.evals``), so an eval outlives its client and a
restart of everything, and ``--resume`` skips what finished. A run's trace is created here,
not by the client: its id derives from the eval and the run (a repeat starts nothing), the
task's files ride on its ``trace_created`` (written before the first model call) and its
``check`` on its eval tag, which the verifier runs in the trace's working directory once it
completes and files under ``<owner>.<eval>.check.<trace>``.
"""

from __future__ import annotations

import re
import time
from typing import TYPE_CHECKING, Annotated, Any

import msgspec
from fastapi import APIRouter, Path
from longhaul.core.evals import EVAL_PREFIX
from longhaul.domain import evals
from longhaul.domain.ids import new_id
from longhaul.domain.messages import content_text
from longhaul.gateway import access
from longhaul.gateway.auth import CurrentPrincipal
from longhaul.gateway.deps import CurrentRuntime
from longhaul.gateway.errors import ERROR_RESPONSES, ApiError, not_found
from longhaul.gateway.schemas.common import Amount, Body, ModelName, integral
from longhaul.gateway.schemas.derived import view_of
from longhaul.gateway.schemas.traces import Accepted
from longhaul.gateway.usecases import evals as eval_usecases
from pydantic import BaseModel, BeforeValidator, Field, ValidationError

MAX_RECORD_BYTES = 768 * 1024
"""An eval record (the suite with its files) is one KV value, under JetStream's 1 MiB."""

router = APIRouter(prefix="/api/evals", tags=["evals"], responses=ERROR_RESPONSES)
eval_tasks_router = APIRouter(prefix="/api/eval-tasks", tags=["evals"], responses=ERROR_RESPONSES)
"""Apart from ``/api/evals``: a path there is an eval's id."""

EvalId = Annotated[str, Path(pattern=rf"^{EVAL_PREFIX}_[A-Za-z0-9]{{1,64}}$")]
TaskName = Annotated[str, Field(pattern=evals.TASK_ID)]
Repeat = Annotated[int, Field(ge=0, lt=evals.MAX_REPEAT), BeforeValidator(integral)]


class CreateEvalRequest(Body):
    suite: dict[str, Any] = Field(description="the suite (docs/06-evals.md), as parsed YAML")
    models: list[ModelName] = Field(
        default_factory=list,
        max_length=evals.MAX_MODELS,
        description="at least one, unless replay_of gives the recorded eval's",
    )
    repeat: Annotated[int, Field(ge=1, le=evals.MAX_REPEAT), BeforeValidator(integral)] = 1
    replay_of: str | None = Field(
        default=None,
        pattern=rf"^{EVAL_PREFIX}_[A-Za-z0-9]{{1,64}}$",
        description="replay this earlier eval: its models and repeats, every model call "
        "answered from the run it recorded (no tokens)",
    )
    notify: bool = Field(
        default=False, description="its runs send run.* notifications (by default they send none)"
    )


class StartRunRequest(Body):
    task: TaskName
    model: ModelName
    repeat: Repeat


class CheckVerdictBody(Body):
    check: str = Field(max_length=256)
    passed: bool
    detail: str = Field(default="", max_length=4096)
    skipped: bool = False


class RunResultBody(Body):
    task: TaskName
    model: ModelName
    repeat: Repeat
    trace_id: str = Field(min_length=1, max_length=128)
    status: str = Field(max_length=32)
    passed: bool
    tokens: Amount = 0
    cost: float = Field(default=0.0, ge=0, allow_inf_nan=False)
    duration_s: float = Field(default=0.0, ge=0, allow_inf_nan=False)
    model_calls: Amount = 0
    recovered: bool = False
    reasons: list[Annotated[str, Field(max_length=4096)]] = Field(
        default_factory=list, max_length=16
    )
    diverged: str | None = Field(default=None, max_length=4096)
    output: str | None = Field(default=None, max_length=evals.MAX_OUTPUT_CHARS)
    checks: list[CheckVerdictBody] = Field(default_factory=list, max_length=evals.MAX_CHECKS)
    ended_at: float = Field(default=0.0, ge=0, allow_inf_nan=False)


if TYPE_CHECKING:  # derived at runtime; mypy sees a model of unknown fields

    class RunView(BaseModel): ...

else:
    RunView = view_of(evals.RunResult, name="RunView")


class EvalSummary(BaseModel):
    eval_id: str
    suite_name: str
    models: list[str]
    repeat: int
    tasks: int
    created_at: float
    replay_of: str | None = None


class EvalView(EvalSummary):
    suite: dict[str, Any]
    runs: list[RunView] = Field(description="the runs scored so far")
    summary: dict[str, dict[str, Any]] = Field(
        description="per model: passed, total, pass_rate, ci_low, ci_high, tokens_median, …"
    )


class EvalList(BaseModel):
    evals: list[EvalSummary]


class CheckView(BaseModel):
    trace_id: str
    passed: bool
    log: str
    checks: list[CheckVerdictBody] = Field(
        default_factory=list, description="each library check's verdict"
    )


def _summary(record: evals.EvalRecord) -> EvalSummary:
    return EvalSummary(
        eval_id=record.eval_id,
        suite_name=str(record.suite.get("name", "")),
        models=list(record.models),
        repeat=record.repeat,
        tasks=len(record.suite.get("tasks", [])),
        created_at=record.created_at,
        replay_of=record.replay_of,
    )


def _parsed(suite: dict[str, Any]) -> evals.Suite:
    try:
        return evals.parse_suite(suite)
    except evals.SuiteError as exc:
        raise ApiError(422, "invalid_suite", str(exc)) from None


@router.post("", status_code=201, response_model=EvalView, summary="Create an eval run")
async def create_eval(
    body: CreateEvalRequest, runtime: CurrentRuntime, principal: CurrentPrincipal
) -> EvalView:
    suite = _parsed(body.suite)
    models, repeat = await eval_usecases.models_and_repeat(
        runtime, principal, suite, (list(body.models), body.repeat), body.replay_of
    )
    await eval_usecases.checked_suite(runtime, principal, suite, models)
    record = evals.EvalRecord(
        eval_id=new_id(EVAL_PREFIX),
        suite=body.suite,
        models=models,
        repeat=repeat,
        created_at=time.time(),
        replay_of=body.replay_of,
        notify=body.notify,
    )
    size = len(msgspec.json.encode(record))
    if size > MAX_RECORD_BYTES:
        raise ApiError(
            413,
            "body_too_large",
            f"the suite takes {size} bytes stored, over {MAX_RECORD_BYTES}: move large files "
            "out of it",
        )
    async with runtime.nats_call():
        await runtime.service.evals.create(principal.owner, record)
    return _view(record, [])


@router.get("", response_model=EvalList, summary="Your eval runs, newest first")
async def list_evals(runtime: CurrentRuntime, principal: CurrentPrincipal) -> EvalList:
    async with runtime.nats_call():
        records = await runtime.service.evals.owned(principal.owner)
    return EvalList(evals=[_summary(r) for r in records])


def _view(record: evals.EvalRecord, runs: list[evals.RunResult]) -> EvalView:
    ordered = sorted(runs, key=lambda r: (r.model, r.task, r.repeat))
    return EvalView(
        **_summary(record).model_dump(),
        suite=record.suite,
        runs=[RunView.model_validate(msgspec.to_builtins(r)) for r in ordered],
        summary=evals.summarize(ordered),
    )


class TaskFromTraceRequest(Body):
    trace_id: str = Field(min_length=1, max_length=128)
    id: TaskName | None = Field(default=None, description="default: from the trace's name")
    check: str | None = Field(default=None, min_length=1, max_length=4096)
    answer: str | None = Field(default=None, min_length=1, max_length=1024)


class TaskFromTrace(BaseModel):
    task: dict[str, Any] = Field(description="a suite task (docs/06-evals.md), ready to append")
    skipped_files: list[str] = Field(
        default_factory=list, description="files the run started with that are not text"
    )


TASK_SETTINGS = (
    "preset",
    "tools",
    "skills",
    "max_iterations",
    "max_tokens",
    "max_cost",
    "temperature",
    "system_prompt",
    "verification",
)
"""What a recorded run's configuration carries into its task (not its model: the eval
chooses, and not approvals or client tools: an eval has nobody to answer them)."""


def _task_id(state_name: str | None, trace_id: str) -> str:
    words = re.findall(r"[A-Za-z0-9]+", (state_name or "").lower())[:6]
    return "-".join(words)[:64] or trace_id[-12:].lower()


@eval_tasks_router.post(
    "",
    summary="A suite task made from a recorded run (its first messages and files)",
)
async def task_from_trace(
    body: TaskFromTraceRequest, runtime: CurrentRuntime, principal: CurrentPrincipal
) -> TaskFromTrace:
    state = await access.owned_trace(runtime, principal, body.trace_id)
    created, uploads = await eval_usecases.beginning(runtime, body.trace_id)
    if created is None:
        raise not_found("trace", body.trace_id)
    prompt = "\n\n".join(
        content_text(m.content) for m in created.messages if m.role == "user"
    ).strip()
    if not prompt:
        raise ApiError(422, "invalid_request", f"trace {body.trace_id} started without a prompt")
    task: dict[str, Any] = {"id": body.id or _task_id(state.name, body.trace_id), "prompt": prompt}
    files, skipped = await eval_usecases.texts(runtime, uploads)
    if files:
        task["files"] = files
    for field in ("check", "answer"):
        if getattr(body, field) is not None:
            task[field] = getattr(body, field)
    config = msgspec.to_builtins(created.config)
    task.update({k: config[k] for k in TASK_SETTINGS if config.get(k) not in (None, [], "default")})
    try:
        evals.EvalTask.model_validate(task)
    except ValidationError as exc:
        raise ApiError(422, "invalid_suite", evals.describe(exc)) from None
    return TaskFromTrace(task=task, skipped_files=skipped)


@router.get("/{eval_id}", response_model=EvalView, summary="An eval run with its scored runs")
async def get_eval(
    eval_id: EvalId, runtime: CurrentRuntime, principal: CurrentPrincipal
) -> EvalView:
    record = await eval_usecases.owned_eval(runtime, principal, eval_id)
    async with runtime.nats_call():
        runs = await runtime.service.evals.runs(principal.owner, eval_id)
    return _view(record, runs)


@router.post(
    "/{eval_id}/runs",
    status_code=202,
    summary="Start one run (task, model, repeat) as a trace; a repeat starts nothing",
)
async def start_run(
    eval_id: EvalId, body: StartRunRequest, runtime: CurrentRuntime, principal: CurrentPrincipal
) -> Accepted:
    trace_id, status, event_id = await eval_usecases.start_run(
        runtime, principal, eval_id, body.task, body.model, body.repeat
    )
    return Accepted(trace_id=trace_id, status=status, event_id=event_id)


@router.put(
    "/{eval_id}/runs", response_model=RunView, summary="Record how one run scored (the client's)"
)
async def record_run(
    eval_id: EvalId, body: RunResultBody, runtime: CurrentRuntime, principal: CurrentPrincipal
) -> RunView:
    await eval_usecases.owned_eval(runtime, principal, eval_id)
    state = await access.owned_trace(runtime, principal, body.trace_id)
    tag = state.eval
    if tag is None or (tag.eval_id, tag.task, tag.repeat) != (eval_id, body.task, body.repeat):
        raise ApiError(
            422, "invalid_request", f"trace {body.trace_id} is not that run of eval {eval_id}"
        )
    run = msgspec.convert(body.model_dump(), evals.RunResult)
    async with runtime.nats_call():
        await runtime.service.evals.put_run(
            principal.owner, eval_id, evals.run_key(body.task, body.model, body.repeat), run
        )
    return RunView.model_validate(body.model_dump())


@router.get(
    "/{eval_id}/checks/{trace_id}",
    summary="What a run's check did (404 until the verifier ran it)",
)
async def get_check(
    eval_id: EvalId, trace_id: str, runtime: CurrentRuntime, principal: CurrentPrincipal
) -> CheckView:
    access.checked_id("trace", trace_id)
    async with runtime.nats_call():
        outcome = await runtime.service.evals.check(principal.owner, eval_id, trace_id)
    if outcome is None:
        raise not_found("check of trace", trace_id)
    return CheckView.model_validate(msgspec.to_builtins(outcome))
