"""Eval runs (``/api/evals``): check a suite, start and record its runs, make a task from a
recorded run; what tags a run's trace and what a list of traces leaves out.

An eval's run carries its task's check and library checks on its eval tag (the verifier
scores them once it completes) and whether it notifies: an eval's runs are measurements, so
they send no ``run.*`` notification unless the eval asked (``longhaul eval --notify``).
"""

from __future__ import annotations

import msgspec
from longhaul.core.index import TraceIndexEntry
from longhaul.domain import evals
from longhaul.domain import events as ev
from longhaul.domain.replay import REPLAY_PREFIX
from longhaul.gateway import commands
from longhaul.gateway.auth import Principal
from longhaul.gateway.errors import ApiError, not_found
from longhaul.gateway.runtime import Runtime
from longhaul.gateway.schemas.traces import CreateTraceRequest, TraceStatusName
from longhaul.gateway.usecases.files import stored
from longhaul.gateway.usecases.start import check_model, trace_creation
from pydantic import ValidationError


def run_tag(
    record: evals.EvalRecord, suite: evals.Suite, task: evals.EvalTask, repeat: int
) -> ev.EvalTag:
    """The eval tag of one run's trace."""
    return ev.EvalTag(
        eval_id=record.eval_id,
        task=task.id,
        repeat=repeat,
        check=task.check,
        checks=[c.model_dump(mode="json", exclude_defaults=True) for c in suite.checks_of(task)],
        notify=record.notify,
    )


def rubric_models(suite: evals.Suite) -> list[tuple[str, str]]:
    """(task id, model) of every rubric that names its own model: each must be one a run
    could use, or the eval is refused before it starts."""
    return [
        (task.id, check.model)
        for task in suite.tasks
        for check in suite.checks_of(task)
        if check.model is not None
    ]


def not_an_eval_run(entry: TraceIndexEntry) -> bool:
    """What a list of traces keeps unless asked for evals too (``GET /api/traces?evals=false``)."""
    return entry.eval_id is None


async def owned_eval(runtime: Runtime, principal: Principal, eval_id: str) -> evals.EvalRecord:
    async with runtime.nats_call():
        record = await runtime.service.evals.get(principal.owner, eval_id)
    if record is None:
        raise not_found("eval", eval_id)
    return record


async def checked_suite(
    runtime: Runtime, principal: Principal, suite: evals.Suite, models: list[str]
) -> None:
    """Refuse a suite no run of could start: each task's trace body on each model, and each
    rubric's model."""
    for task_id, rubric_model in rubric_models(suite):
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


async def models_and_repeat(
    runtime: Runtime,
    principal: Principal,
    suite: evals.Suite,
    asked: tuple[list[str], int],
    replay_of: str | None,
) -> tuple[list[str], int]:
    """The body's, or on a replay the recorded eval's (each task must have been one of its)."""
    if replay_of is None:
        models, repeat = asked
        if not models:
            raise ApiError(422, "invalid_request", "models: at least one model")
        return list(models), repeat
    recorded = await owned_eval(runtime, principal, replay_of)
    known = {task.get("id") for task in recorded.suite.get("tasks", [])}
    missing = [task.id for task in suite.tasks if task.id not in known]
    if missing:
        raise ApiError(
            422,
            "invalid_suite",
            f"eval {replay_of} recorded no run of task(s) {', '.join(missing)}",
        )
    return list(recorded.models), recorded.repeat


async def start_run(
    runtime: Runtime, principal: Principal, eval_id: str, task_id: str, model: str, repeat: int
) -> tuple[str, TraceStatusName, int]:
    """(trace id, status, event id) of one run (task, model, repeat) of the caller's eval,
    started as a trace under an id derived from the run, so a repeat starts nothing."""
    record = await owned_eval(runtime, principal, eval_id)
    suite = evals.parse_suite(record.suite)
    task = suite.task(task_id)
    if task is None or model not in record.models or repeat >= record.repeat:
        raise not_found(f"eval {eval_id} run", f"{task_id}/{model}/{repeat}")
    key = evals.run_key(task.id, model, repeat)
    trace_id = commands.keyed_trace_id(principal.owner, f"eval:{eval_id}:{key}")
    seq = await commands.keyed_creation(runtime, principal, trace_id)
    if seq is not None:
        return trace_id, "running", seq
    create = CreateTraceRequest.model_validate(suite.body(task, model))
    event = await trace_creation(runtime, principal, create)
    if record.replay_of is not None:
        recorded = await _recorded_run(runtime, principal, record.replay_of, key)
        config = msgspec.structs.replace(event.config, model=f"{REPLAY_PREFIX}{recorded}")
        event = msgspec.structs.replace(event, config=config)
    files = await _files(runtime, principal, trace_id, task)
    tag = run_tag(record, suite, task, repeat)
    # an eval run keeps its task's name: the runs of a suite are compared by it
    event = msgspec.structs.replace(event, eval=tag, files=files, untitled=False)
    state = await commands.create_trace(runtime, principal, event, trace_id)
    return trace_id, state.status or "running", state.stream_seq


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


async def beginning(
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


async def texts(
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
