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
from longhaul.domain import events as ev
from longhaul.domain.ids import new_id
from longhaul.domain.messages import content_text
from longhaul.domain.replay import REPLAY_PREFIX
from longhaul.gateway import access, commands
from longhaul.gateway.auth import CurrentPrincipal, Principal
from longhaul.gateway.deps import CurrentRuntime
from longhaul.gateway.errors import ERROR_RESPONSES, ApiError, not_found
from longhaul.gateway.runtime import Runtime
from longhaul.gateway.schemas.common import Amount, Body, ModelName, integral
from longhaul.gateway.schemas.derived import view_of
from longhaul.gateway.schemas.traces import Accepted, CreateTraceRequest
from longhaul.gateway.usecases import evals as eval_usecases
from longhaul.gateway.usecases.files import stored
from longhaul.gateway.usecases.start import check_model, trace_creation
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


async def _checked_suite(
    runtime: Runtime, principal: Principal, suite: evals.Suite, models: list[str]
) -> None:
    """Refuse a suite no run of could start: each task's trace body on each model, and each
    rubric's model."""
    for task_id, rubric_model in eval_usecases.rubric_models(suite):
        check_model(runtime, rubric_model, field=f"task {task_id}: rubric model")
    for model in models:
        for task in suite.tasks:
            try:
                create = CreateTraceRequest.model_validate(suite.body(task, model))
            except ValidationError as exc:
                raise ApiError(
                    422, "invalid_suite", f"task {task.id}: {evals.describe(exc)}"
                ) from None
            await trace_creation(runtime, principal, create)


async def _models_and_repeat(
    runtime: Runtime, principal: Principal, body: CreateEvalRequest, suite: evals.Suite
) -> tuple[list[str], int]:
    """The body's, or on a replay the recorded eval's (each task must have been one of its)."""
    if body.replay_of is None:
        if not body.models:
            raise ApiError(422, "invalid_request", "models: at least one model")
        return list(body.models), body.repeat
    recorded = await _record(runtime, principal, body.replay_of)
    known = {task.get("id") for task in recorded.suite.get("tasks", [])}
    missing = [task.id for task in suite.tasks if task.id not in known]
    if missing:
        raise ApiError(
            422,
            "invalid_suite",
            f"eval {body.replay_of} recorded no run of task(s) {', '.join(missing)}",
        )
    return list(recorded.models), recorded.repeat


@router.post("", status_code=201, response_model=EvalView, summary="Create an eval run")
async def create_eval(
    body: CreateEvalRequest, runtime: CurrentRuntime, principal: CurrentPrincipal
) -> EvalView:
    suite = _parsed(body.suite)
    models, repeat = await _models_and_repeat(runtime, principal, body, suite)
    await _checked_suite(runtime, principal, suite, models)
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


async def _beginning(
    runtime: Runtime, trace_id: str
) -> tuple[ev.TraceCreated | None, list[ev.FileUploaded]]:
    """The run's creation and the files it had before its first model answer."""
    created: ev.TraceCreated | None = None
    files: dict[str, ev.FileUploaded] = {}
    async with runtime.nats_call():
        async for recorded in runtime.traces.replay(trace_id):
            event = recorded.event
            if isinstance(event, ev.TraceCreated):
                created = event
                files.update((f.name, f) for f in event.files)
            elif isinstance(event, ev.FileUploaded):
                files[event.name] = event
            elif isinstance(event, ev.MessageAppended) and event.role == "assistant":
                break
    return created, list(files.values())


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
    created, uploads = await _beginning(runtime, body.trace_id)
    if created is None:
        raise not_found("trace", body.trace_id)
    prompt = "\n\n".join(
        content_text(m.content) for m in created.messages if m.role == "user"
    ).strip()
    if not prompt:
        raise ApiError(422, "invalid_request", f"trace {body.trace_id} started without a prompt")
    task: dict[str, Any] = {"id": body.id or _task_id(state.name, body.trace_id), "prompt": prompt}
    files, skipped = await _texts(runtime, uploads)
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


async def _texts(
    runtime: Runtime, uploads: list[ev.FileUploaded]
) -> tuple[dict[str, str], list[str]]:
    """The uploads' contents that are text within a task's limits; the names of the rest."""
    files: dict[str, str] = {}
    skipped: list[str] = []
    for upload in uploads:
        async with runtime.nats_call():
            entry = await runtime.service.workspace.get(upload.key)
        try:
            if entry is None or len(entry.value) > evals.MAX_FILE_BYTES:
                raise ValueError(upload.name)
            files[upload.name] = entry.value.decode()
        except (ValueError, UnicodeDecodeError):
            skipped.append(upload.name)
    return files, skipped


@router.get("/{eval_id}", response_model=EvalView, summary="An eval run with its scored runs")
async def get_eval(
    eval_id: EvalId, runtime: CurrentRuntime, principal: CurrentPrincipal
) -> EvalView:
    record = await _record(runtime, principal, eval_id)
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
    if record.replay_of is not None:
        recorded = await _recorded_run(runtime, principal, record.replay_of, key)
        config = msgspec.structs.replace(event.config, model=f"{REPLAY_PREFIX}{recorded}")
        event = msgspec.structs.replace(event, config=config)
    files = await _files(runtime, principal, trace_id, task)
    tag = eval_usecases.run_tag(record, suite, task, body.repeat)
    # an eval run keeps its task's name: the runs of a suite are compared by it
    event = msgspec.structs.replace(event, eval=tag, files=files, untitled=False)
    state = await commands.create_trace(runtime, principal, event, trace_id)
    return Accepted(trace_id=trace_id, status=state.status or "running", event_id=state.stream_seq)


async def _recorded_run(runtime: Runtime, principal: Principal, eval_id: str, key: str) -> str:
    """The trace the replayed eval recorded for one run (409 if it never scored that run)."""
    async with runtime.nats_call():
        run = await runtime.service.evals.run(principal.owner, eval_id, key)
    if run is None:
        raise ApiError(409, "conflict", f"eval {eval_id} has no recorded run to replay here")
    return run.trace_id


async def _files(
    runtime: Runtime, principal: Principal, trace_id: str, task: evals.EvalTask
) -> list[ev.FileUploaded]:
    """The task's files, stored like uploads (and counted in the key's upload quota)."""
    contents = [(path, text.encode(), "text/plain") for path, text in task.files.items()]
    return await stored(runtime, principal.owner, trace_id, contents)


@router.put(
    "/{eval_id}/runs", response_model=RunView, summary="Record how one run scored (the client's)"
)
async def record_run(
    eval_id: EvalId, body: RunResultBody, runtime: CurrentRuntime, principal: CurrentPrincipal
) -> RunView:
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
