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

import time
from typing import TYPE_CHECKING, Annotated, Any

import msgspec
from fastapi import APIRouter, Path, Request
from longhaul.core.evals import EVAL_PREFIX
from longhaul.domain import evals
from longhaul.domain import events as ev
from longhaul.domain.ids import new_id
from longhaul.gateway import access, commands
from longhaul.gateway.auth import CurrentPrincipal, Principal
from longhaul.gateway.errors import ERROR_RESPONSES, ApiError, not_found
from longhaul.gateway.routers.files import charge, store_upload
from longhaul.gateway.routers.traces import trace_creation
from longhaul.gateway.runtime import Runtime, runtime_of
from longhaul.gateway.schemas.common import Amount, Body, ModelName, integral
from longhaul.gateway.schemas.derived import view_of
from longhaul.gateway.schemas.traces import Accepted, CreateTraceRequest
from pydantic import BaseModel, BeforeValidator, Field, ValidationError

MAX_RECORD_BYTES = 768 * 1024
"""An eval record (the suite with its files) is one KV value, under JetStream's 1 MiB."""

router = APIRouter(prefix="/api/evals", tags=["evals"], responses=ERROR_RESPONSES)

EvalId = Annotated[str, Path(pattern=rf"^{EVAL_PREFIX}_[A-Za-z0-9]{{1,64}}$")]
TaskName = Annotated[str, Field(pattern=evals.TASK_ID)]
Repeat = Annotated[int, Field(ge=0, lt=evals.MAX_REPEAT), BeforeValidator(integral)]


class CreateEvalRequest(Body):
    suite: dict[str, Any] = Field(description="the suite (README: Evals), as parsed YAML")
    models: list[ModelName] = Field(min_length=1, max_length=evals.MAX_MODELS)
    repeat: Annotated[int, Field(ge=1, le=evals.MAX_REPEAT), BeforeValidator(integral)] = 1


class StartRunRequest(Body):
    task: TaskName
    model: ModelName
    repeat: Repeat


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


def _summary(record: evals.EvalRecord) -> EvalSummary:
    return EvalSummary(
        eval_id=record.eval_id,
        suite_name=str(record.suite.get("name", "")),
        models=list(record.models),
        repeat=record.repeat,
        tasks=len(record.suite.get("tasks", [])),
        created_at=record.created_at,
    )


async def _checked_suite(request: Request, principal: Principal, body: CreateEvalRequest) -> None:
    """Refuse a suite no run of could start: its format, each task's trace body, the models."""
    try:
        suite = evals.parse_suite(body.suite)
    except evals.SuiteError as exc:
        raise ApiError(422, "invalid_suite", str(exc)) from None
    for model in body.models:
        for task in suite.tasks:
            try:
                create = CreateTraceRequest.model_validate(suite.body(task, model))
            except ValidationError as exc:
                raise ApiError(
                    422, "invalid_suite", f"task {task.id}: {evals.describe(exc)}"
                ) from None
            await trace_creation(runtime_of(request.app), principal, create)


@router.post("", status_code=201, response_model=EvalView, summary="Create an eval run")
async def create_eval(
    body: CreateEvalRequest, request: Request, principal: CurrentPrincipal
) -> EvalView:
    await _checked_suite(request, principal, body)
    record = evals.EvalRecord(
        eval_id=new_id(EVAL_PREFIX),
        suite=body.suite,
        models=list(body.models),
        repeat=body.repeat,
        created_at=time.time(),
    )
    size = len(msgspec.json.encode(record))
    if size > MAX_RECORD_BYTES:
        raise ApiError(
            413,
            "body_too_large",
            f"the suite takes {size} bytes stored, over {MAX_RECORD_BYTES}: move large files "
            "out of it",
        )
    runtime = runtime_of(request.app)
    async with runtime.nats_call():
        await runtime.service.evals.create(principal.owner, record)
    return _view(record, [])


@router.get("", response_model=EvalList, summary="Your eval runs, newest first")
async def list_evals(request: Request, principal: CurrentPrincipal) -> EvalList:
    runtime = runtime_of(request.app)
    async with runtime.nats_call():
        records = await runtime.service.evals.owned(principal.owner)
    return EvalList(evals=[_summary(r) for r in records])


async def _record(runtime: Runtime, principal: Principal, eval_id: str) -> evals.EvalRecord:
    async with runtime.nats_call():
        record = await runtime.service.evals.get(principal.owner, eval_id)
    if record is None:
        raise not_found("eval", eval_id)
    return record


def _view(record: evals.EvalRecord, runs: list[evals.RunResult]) -> EvalView:
    ordered = sorted(runs, key=lambda r: (r.model, r.task, r.repeat))
    return EvalView(
        **_summary(record).model_dump(),
        suite=record.suite,
        runs=[RunView.model_validate(msgspec.to_builtins(r)) for r in ordered],
        summary=evals.summarize(ordered),
    )


@router.get("/{eval_id}", response_model=EvalView, summary="An eval run with its scored runs")
async def get_eval(eval_id: EvalId, request: Request, principal: CurrentPrincipal) -> EvalView:
    runtime = runtime_of(request.app)
    record = await _record(runtime, principal, eval_id)
    async with runtime.nats_call():
        runs = await runtime.service.evals.runs(principal.owner, eval_id)
    return _view(record, runs)


@router.post(
    "/{eval_id}/runs",
    status_code=202,
    response_model=Accepted,
    summary="Start one run (task, model, repeat) as a trace; a repeat starts nothing",
)
async def start_run(
    eval_id: EvalId, body: StartRunRequest, request: Request, principal: CurrentPrincipal
) -> Accepted:
    runtime = runtime_of(request.app)
    record = await _record(runtime, principal, eval_id)
    suite = evals.parse_suite(record.suite)
    task = suite.task(body.task)
    if task is None or body.model not in record.models or body.repeat >= record.repeat:
        raise not_found(f"eval {eval_id} run", f"{body.task}/{body.model}/{body.repeat}")
    key = evals.run_key(task.id, body.model, body.repeat)
    trace_id = commands.keyed_trace_id(principal.owner, f"eval:{eval_id}:{key}")
    seq = await commands.keyed_creation(runtime, principal, trace_id)
    if seq is not None:
        return Accepted(trace_id=trace_id, status="running", event_id=seq)
    create = CreateTraceRequest.model_validate(suite.body(task, body.model))
    event = await trace_creation(runtime, principal, create)
    files = await _files(runtime, principal, trace_id, task)
    tag = ev.EvalTag(eval_id=eval_id, task=task.id, repeat=body.repeat, check=task.check)
    event = msgspec.structs.replace(event, eval=tag, files=files)
    state = await commands.create_trace(runtime, principal, event, trace_id)
    return Accepted(trace_id=trace_id, status=state.status or "running", event_id=state.stream_seq)


async def _files(
    runtime: Runtime, principal: Principal, trace_id: str, task: evals.EvalTask
) -> list[ev.FileUploaded]:
    """The task's files, stored like uploads (and counted in the key's upload quota)."""
    if not task.files:
        return []
    contents = {path: text.encode() for path, text in task.files.items()}
    async with runtime.nats_call():
        await charge(runtime, principal.owner, sum(len(data) for data in contents.values()))
        return [
            await store_upload(runtime, trace_id, path, data, "text/plain")
            for path, data in contents.items()
        ]


@router.put(
    "/{eval_id}/runs", response_model=RunView, summary="Record how one run scored (the client's)"
)
async def record_run(
    eval_id: EvalId, body: RunResultBody, request: Request, principal: CurrentPrincipal
) -> RunView:
    runtime = runtime_of(request.app)
    await _record(runtime, principal, eval_id)
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
    response_model=CheckView,
    summary="What a run's check did (404 until the verifier ran it)",
)
async def get_check(
    eval_id: EvalId, trace_id: str, request: Request, principal: CurrentPrincipal
) -> CheckView:
    runtime = runtime_of(request.app)
    access.checked_id("trace", trace_id)
    async with runtime.nats_call():
        outcome = await runtime.service.evals.check(principal.owner, eval_id, trace_id)
    if outcome is None:
        raise not_found("check of trace", trace_id)
    return CheckView(trace_id=outcome.trace_id, passed=outcome.passed, log=outcome.log)
