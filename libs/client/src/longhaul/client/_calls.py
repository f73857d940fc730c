"""Every endpoint once: its method, path, parameters, body and answer model.

The sync and async clients only differ in how they send; each of their methods is one of
these builders bound to a sender (:func:`longhaul.client._transport.bind_sync` /
``bind_async``), so paths and bodies are written here and nowhere else.
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar
from urllib.parse import quote

import httpx
from longhaul.client import models
from pydantic import BaseModel

T = TypeVar("T")
M = TypeVar("M", bound=BaseModel)

Messages = str | Sequence[dict[str, Any]]
"""A user message's text, or OpenAI-format messages."""


@dataclass(frozen=True)
class Call(Generic[T]):
    method: str
    path: str
    parse: Callable[[httpx.Response], T]
    params: dict[str, Any] | None = None
    body: Any = None
    """sent as JSON"""
    markdown: str | None = None
    """sent as ``text/markdown`` instead"""
    files: Mapping[str, bytes] | None = None
    """sent as ``multipart/form-data`` (field ``files``) instead"""
    content: bytes | None = None
    """sent as it is (a trace bundle) instead"""
    headers: dict[str, str] | None = None


def _json(model: type[M]) -> Callable[[httpx.Response], M]:
    return lambda response: model.model_validate(response.json())


def _text(response: httpx.Response) -> str:
    return response.text


def _object(response: httpx.Response) -> dict[str, Any]:
    return dict(response.json())


def _id(value: str) -> str:
    """A path segment: an id can never step into another route."""
    return quote(value, safe="")


def _messages(messages: Messages | None) -> list[dict[str, Any]]:
    if messages is None:
        return []
    if isinstance(messages, str):
        return [{"role": "user", "content": messages}]
    return list(messages)


def _present(**values: Any) -> dict[str, Any]:
    return {key: value for key, value in values.items() if value is not None}


def info() -> Call[models.Info]:
    """Gateway version, default model, whether it runs offline, and your owner id."""
    return Call("GET", "/api/info", _json(models.Info))


def start(
    goal: str,
    *,
    mode: str = "auto",
    model: str | None = None,
    preset: str | None = None,
    tools: Sequence[str] | None = None,
    name: str | None = None,
    max_iterations: int | None = None,
    review: bool | None = None,
    files: Mapping[str, bytes] | None = None,
    max_tokens: int | None = None,
    max_cost: float | None = None,
) -> Call[models.RunAccepted]:
    """State a goal; the gateway routes it to one agent (a trace) or a planned team (a task):
    ``mode`` auto, trace or task. The answer says which (``trace_id`` or ``task_id``).
    ``files`` (name → bytes) are in the trace's working directory before its first model
    call (a run with files is one agent)."""
    body = _present(
        files=[
            {"name": name, "content": base64.b64encode(data).decode()}
            for name, data in files.items()
        ]
        if files
        else None,
        goal=goal,
        mode=mode,
        model=model,
        preset=preset,
        tools=list(tools) if tools is not None else None,
        name=name,
        max_iterations=max_iterations,
        max_tokens=max_tokens,
        max_cost=max_cost,
        review=review,
    )
    return Call("POST", "/api/runs", _json(models.RunAccepted), body=body)


def create_trace(
    messages: Messages,
    *,
    model: str | None = None,
    preset: str | None = None,
    tools: Sequence[str] | None = None,
    skills: Sequence[str] | None = None,
    name: str | None = None,
    max_iterations: int | None = None,
    max_tokens: int | None = None,
    max_cost: float | None = None,
    idempotency_key: str | None = None,
    settings: models.TraceSettings | None = None,
    output_schema: dict[str, Any] | type[BaseModel] | None = None,
    **options: Any,
) -> Call[models.Accepted]:
    """Start a trace. ``settings``: every setting at once (:class:`models.TraceSettings`);
    the named ones and ``options`` (the other fields of ``POST /api/traces``:
    ``model_params``, ``approval``, ``verification``, ``auto_execute_tools`` …) go over it.
    ``idempotency_key``: a repeat with the same key starts nothing and answers the first
    trace (safe to retry after a lost answer). ``output_schema``: the answer must be JSON
    matching this schema (a pydantic model's schema; read it with ``Trace.output(model)``)."""
    if isinstance(output_schema, type):
        output_schema = output_schema.model_json_schema()
    if output_schema is not None:
        options["output_schema"] = {"schema": output_schema}
    stated = {} if settings is None else settings.model_dump(exclude_defaults=True)
    body = stated | _present(
        messages=_messages(messages),
        model=model,
        preset=preset,
        tools=list(tools) if tools is not None else None,
        skills=list(skills) if skills is not None else None,
        name=name,
        max_iterations=max_iterations,
        max_tokens=max_tokens,
        max_cost=max_cost,
        **options,
    )
    headers = None if idempotency_key is None else {"Idempotency-Key": idempotency_key}
    return Call("POST", "/api/traces", _json(models.Accepted), body=body, headers=headers)


def list_traces(
    *,
    status: str | Sequence[str] | None = None,
    parent: str | None = None,
    limit: int | None = None,
    cursor: str | None = None,
    evals: bool = True,
) -> Call[models.TraceList]:
    """Your traces, newest first; pass ``next_cursor`` back as ``cursor`` for the next page.
    ``evals=False`` leaves out the runs of evals."""
    statuses = [status] if isinstance(status, str) else status
    params = _present(
        status=list(statuses) if statuses else None,
        parent=parent,
        limit=limit,
        cursor=cursor,
        evals=None if evals else "false",
    )
    return Call("GET", "/api/traces", _json(models.TraceList), params=params)


def get_trace(trace_id: str) -> Call[models.Trace]:
    """A trace with its totals, goal tree, sub-traces and what it waits for."""
    return Call("GET", f"/api/traces/{_id(trace_id)}", _json(models.Trace))


def messages(
    trace_id: str,
    *,
    mode: str = "main_path",
    after: int | None = None,
    before: int | None = None,
    limit: int | None = None,
) -> Call[models.Messages]:
    """The conversation: the main path (``mode="main_path"``) or every branch (``"all"``);
    only sequences above ``after`` and below ``before``; at most ``limit`` of them, the
    lowest (the highest with ``before``: a long trace read from its end, page by page)."""
    params = _present(mode=mode, after=after, before=before, limit=limit)
    return Call("GET", f"/api/traces/{_id(trace_id)}/messages", _json(models.Messages), params)


def context(trace_id: str) -> Call[dict[str, Any]]:
    """What the model is shown: system prompt, tool schemas, preset, skills, parameters."""
    return Call("GET", f"/api/traces/{_id(trace_id)}/context", _object)


def notifications(trace_id: str) -> Call[dict[str, Any]]:
    """What became of each notification the trace made (the operator's ``notify:``
    webhooks): ``{"items": [{delivery_id, webhook, kind, status, attempts, last_error, …}]}``."""
    return Call("GET", f"/api/traces/{_id(trace_id)}/notifications", _object)


def run(
    trace_id: str,
    messages: Messages | None = None,
    *,
    after_sequence: int | None = None,
    model: str | None = None,
    model_params: dict[str, Any] | None = None,
) -> Call[models.Accepted]:
    """Continue (no ``after_sequence``), rewind (new messages hang under message N) or
    regenerate (``after_sequence`` = a user message, no new messages)."""
    body = _present(
        messages=_messages(messages),
        after_sequence=after_sequence,
        model=model,
        model_params=model_params,
    )
    return _steer(trace_id, "run", body)


def upload_files(trace_id: str, files: Mapping[str, bytes]) -> Call[models.FilesAccepted]:
    """Put files (name → bytes) into the trace's working directory before its next model
    call; the agent is told what arrived. Plain names only."""
    return Call(
        "POST", f"/api/traces/{_id(trace_id)}/files", _json(models.FilesAccepted), files=files
    )


def _steer(trace_id: str, action: str, body: Any = None) -> Call[models.Accepted]:
    return Call("POST", f"/api/traces/{_id(trace_id)}/{action}", _json(models.Accepted), body=body)


def send_message(
    trace_id: str,
    content: str,
    *,
    sender: str,
    wake: bool = False,
    conversation_id: str | None = None,
) -> Call[models.MessageAccepted]:
    """Leave a message in a trace's inbox (it was created with ``messaging=True``);
    ``wake``: also wake it if it waits on a person or on its sub-agents."""
    body = _present(**{"from": sender}, content=content, wake=wake, conversation_id=conversation_id)
    path = f"/api/traces/{_id(trace_id)}/inbox"
    return Call("POST", path, _json(models.MessageAccepted), body=body)


def stop(trace_id: str) -> Call[models.Accepted]:
    """Ask a running or waiting trace to stop."""
    return _steer(trace_id, "stop")


def delete(trace_id: str) -> Call[models.Deleted]:
    """Delete a trace and its sub-traces everywhere they are stored (a running one is
    stopped first); the id is unknown afterwards (``NotFound``, a repeat included)."""
    return Call("DELETE", f"/api/traces/{_id(trace_id)}", _json(models.Deleted))


def _bytes(response: httpx.Response) -> bytes:
    return response.content


def export_trace(trace_id: str) -> Call[bytes]:
    """The trace and its sub-traces as one bundle (bytes to keep, or to ``import_trace``)."""
    return Call("GET", f"/api/traces/{_id(trace_id)}/export", _bytes)


def import_trace(bundle: bytes) -> Call[models.TraceImported]:
    """Recreate an exported trace family under this client's key, with new ids."""
    return Call("POST", "/api/traces/import", _json(models.TraceImported), content=bundle)


def resume(trace_id: str) -> Call[models.Accepted]:
    """Continue a stopped, failed or completed trace from its head."""
    return _steer(trace_id, "resume")


def reply(trace_id: str, content: str) -> Call[models.Accepted]:
    """Answer a trace that waits for a human."""
    return _steer(trace_id, "reply", {"content": content})


def approve(
    trace_id: str,
    tool_call_id: str,
    *,
    approved: bool = True,
    reason: str | None = None,
    took_effect: bool = False,
    arguments: dict[str, Any] | None = None,
) -> Call[models.Accepted]:
    """Decide one tool call waiting for approval (``approved=False`` denies it; ``arguments``:
    approve it with these instead of the model's, checked against the tool's schema). For a
    call whose outcome is unknown, ``took_effect=True`` (with ``approved=False``) says it
    happened: ``reason`` is what the model is told."""
    body = _present(
        tool_call_id=tool_call_id,
        approved=approved,
        reason=reason,
        took_effect=took_effect or None,
        arguments=arguments,
    )
    return _steer(trace_id, "approve", body)


def inbox() -> Call[models.Inbox]:
    """Every question, approval and plan review waiting for you across your runs, oldest
    first; answer each with :func:`reply`, :func:`approve` or :func:`review_plan`."""
    return Call("GET", "/api/inbox", _json(models.Inbox))


def usage(group_by: str = "key,model,preset,day", since: str | None = None) -> Call[models.Usage]:
    """What was spent (tokens, dollars, calls) by ``group_by`` (key, model, preset, day) from
    ``since`` (a UTC day, ``YYYY-MM-DD``) on: a key its own, the operator every key's."""
    params = _present(group_by=group_by, since=since)
    return Call("GET", "/api/usage", _json(models.Usage), params=params)


def budget_waits() -> Call[models.BudgetWaits]:
    """Runs waiting at a spend limit, oldest first: yours, or every key's for the operator."""
    return Call("GET", "/api/usage/waits", _json(models.BudgetWaits))


def answer_budget(
    trace_id: str, action: str, *, usd: float = 0.0, tokens: int = 0
) -> Call[models.BudgetAnswered]:
    """Answer a run waiting at a spend limit: ``raise`` (``usd`` / ``tokens`` more for this
    run) or ``stop``."""
    body = {"action": action, "usd": usd, "tokens": tokens}
    path = f"/api/traces/{_id(trace_id)}/budget"
    return Call("POST", path, _json(models.BudgetAnswered), body=body)


def tool_results(trace_id: str, results: Sequence[dict[str, Any]]) -> Call[models.Accepted]:
    """Results of client-executed tool calls: ``[{tool_call_id, content, is_error?}]``."""
    return _steer(trace_id, "tool_results", {"results": list(results)})


def reflect(trace_id: str, focus: str | None = None) -> Call[models.Accepted]:
    return _steer(trace_id, "reflect", _present(focus=focus))


def compact(trace_id: str) -> Call[models.Accepted]:
    return _steer(trace_id, "compact")


def create_task(
    goal: str,
    *,
    mode: str = "plan",
    options: dict[str, Any] | None = None,
    review: bool | None = None,
) -> Call[models.TaskAccepted]:
    """Start a task: the planner splits ``goal`` into phases run by step traces
    (``review=True``: the plan waits in ``awaiting_review`` for :func:`review_plan`)."""
    body = _present(goal=goal, mode=mode, options=options or {}, review=review)
    return Call("POST", "/api/tasks", _json(models.TaskAccepted), body=body)


def review_plan(
    task_id: str,
    *,
    approved: bool,
    phases: Sequence[dict[str, Any]] | None = None,
    reason: str = "",
) -> Call[models.TaskAccepted]:
    """Approve a plan waiting for review (``phases``: an edited plan to run instead) or
    refuse it (``approved=False``: the task is cancelled)."""
    body = _present(
        approved=approved, phases=list(phases) if phases is not None else None, reason=reason
    )
    return Call("POST", f"/api/tasks/{_id(task_id)}/plan", _json(models.TaskAccepted), body=body)


def list_tasks(*, limit: int | None = None, cursor: str | None = None) -> Call[models.TaskList]:
    params = _present(limit=limit, cursor=cursor)
    return Call("GET", "/api/tasks", _json(models.TaskList), params=params)


def get_task(task_id: str) -> Call[models.Task]:
    return Call("GET", f"/api/tasks/{_id(task_id)}", _json(models.Task))


def resume_task(task_id: str) -> Call[models.TaskAccepted]:
    """Resume a failed or stopped task from its checkpoints."""
    return Call("POST", f"/api/tasks/{_id(task_id)}/resume", _json(models.TaskAccepted))


def delete_task(task_id: str) -> Call[models.TaskDeleted]:
    """Delete an ended task with its step traces everywhere they are stored (``Conflict``
    while it still plans or runs)."""
    return Call("DELETE", f"/api/tasks/{_id(task_id)}", _json(models.TaskDeleted))


def list_keys() -> Call[models.KeyHoldingsList]:
    """The operator's: every owner with what it holds, the configured keys first, then the
    revoked ones (removed from ``gateway.api_keys``) that left something behind."""
    return Call("GET", "/api/admin/keys", _json(models.KeyHoldingsList))


def erase_key(owner: str) -> Call[models.KeyErased]:
    """The operator's (a client built with one of ``gateway.admin_keys``): erase every
    trace, task, experience, upload and image of the key whose owner id is ``owner``."""
    return Call("DELETE", f"/api/admin/keys/{_id(owner)}/data", _json(models.KeyErased))


def list_experiences(
    *,
    tag: str | None = None,
    category: str | None = None,
    text: str | None = None,
    limit: int | None = None,
    cursor: str | None = None,
) -> Call[models.ExperienceList]:
    """Your experiences, newest first, filtered by tag, category or text in the content."""
    params = _present(tag=tag, category=category, q=text, limit=limit, cursor=cursor)
    return Call("GET", "/api/experiences", _json(models.ExperienceList), params=params)


def get_experience(experience_id: str) -> Call[models.Experience]:
    return Call("GET", f"/api/experiences/{_id(experience_id)}", _json(models.Experience))


def export_experiences() -> Call[str]:
    """Your experiences as one markdown file (what :func:`import_experiences` reads)."""
    return Call("GET", "/api/experiences/export", _text)


def import_experiences(markdown: str) -> Call[models.Imported]:
    """Read an exported file back: the same ids are replaced, new ones added."""
    return Call("POST", "/api/experiences/import", _json(models.Imported), markdown=markdown)


def create_eval(
    suite: Mapping[str, Any],
    model_names: Sequence[str] = (),
    *,
    repeat: int = 1,
    replay_of: str | None = None,
    notify: bool = False,
) -> Call[models.Eval]:
    """Register an eval run of ``suite`` (parsed YAML) on ``model_names``, ``repeat`` times;
    ``replay_of``: replay that eval instead (its models and repeats, no model call);
    ``notify``: its runs send notifications (by default they send none)."""
    body: dict[str, Any] = {"suite": dict(suite), "models": list(model_names), "repeat": repeat}
    if replay_of is not None:
        body["replay_of"] = replay_of
    if notify:
        body["notify"] = True
    return Call("POST", "/api/evals", _json(models.Eval), body=body)


def task_from_trace(
    trace_id: str,
    *,
    task_id: str | None = None,
    check: str | None = None,
    answer: str | None = None,
) -> Call[models.TaskFromTrace]:
    """A suite task made from a recorded run: its first messages and the files it had."""
    body = {"trace_id": trace_id, **_present(id=task_id, check=check, answer=answer)}
    return Call("POST", "/api/eval-tasks", _json(models.TaskFromTrace), body=body)


def list_evals() -> Call[models.EvalList]:
    """Your eval runs, newest first."""
    return Call("GET", "/api/evals", _json(models.EvalList))


def get_eval(eval_id: str) -> Call[models.Eval]:
    """An eval run with the runs scored so far and its table per model."""
    return Call("GET", f"/api/evals/{_id(eval_id)}", _json(models.Eval))


def start_eval_run(eval_id: str, task: str, model: str, repeat: int) -> Call[models.Accepted]:
    """Start one run as a trace (a repeat answers the same trace and starts nothing)."""
    body = {"task": task, "model": model, "repeat": repeat}
    return Call("POST", f"/api/evals/{_id(eval_id)}/runs", _json(models.Accepted), body=body)


def record_eval_run(eval_id: str, run: Mapping[str, Any]) -> Call[models.EvalRun]:
    """Store how one run scored (``EvalRun`` fields)."""
    return Call("PUT", f"/api/evals/{_id(eval_id)}/runs", _json(models.EvalRun), body=dict(run))


def eval_check(eval_id: str, trace_id: str) -> Call[models.EvalCheck]:
    """A run's check outcome (:class:`NotFound` until the verifier ran it)."""
    path = f"/api/evals/{_id(eval_id)}/checks/{_id(trace_id)}"
    return Call("GET", path, _json(models.EvalCheck))


def trace_events_path(trace_id: str) -> str:
    return f"/api/traces/{_id(trace_id)}/events"


def task_checkpoints(task_id: str) -> Call[models.CheckpointList]:
    """The saved results of a task's completed phases (what a resume starts from)."""
    path = f"/api/tasks/{_id(task_id)}/checkpoints"
    return Call("GET", path, _json(models.CheckpointList))


def clear_task_checkpoints(task_id: str) -> Call[models.CheckpointsCleared]:
    """Remove a task's checkpoints; a resume then reads completed phases from the log."""
    path = f"/api/tasks/{_id(task_id)}/checkpoints"
    return Call("DELETE", path, _json(models.CheckpointsCleared))


def task_events_path(task_id: str) -> str:
    return f"/api/tasks/{_id(task_id)}/events"


def create_schedule(
    name: str,
    template: Mapping[str, Any],
    *,
    cron: str | None = None,
    timezone: str | None = None,
    every_s: float | None = None,
    at: str | None = None,
    overlap: str | None = None,
    catch_up: str | None = None,
    paused: bool | None = None,
) -> Call[models.Schedule]:
    """A schedule starting ``template`` (``{"kind": "trace" | "task", "body": {…}}``) on
    one of ``cron`` (5 fields, in ``timezone``), ``every_s`` or ``at`` (RFC 3339)."""
    body = _present(
        name=name,
        template=dict(template),
        cron=cron,
        timezone=timezone,
        every_s=every_s,
        at=at,
        overlap=overlap,
        catch_up=catch_up,
        paused=paused,
    )
    return Call("POST", "/api/schedules", _json(models.Schedule), body=body)


def list_schedules() -> Call[models.ScheduleList]:
    return Call("GET", "/api/schedules", _json(models.ScheduleList))


def get_schedule(schedule_id: str) -> Call[models.Schedule]:
    return Call("GET", f"/api/schedules/{_id(schedule_id)}", _json(models.Schedule))


def update_schedule(schedule_id: str, **changes: Any) -> Call[models.Schedule]:
    """Change fields (``paused=True`` pauses, ``paused=False`` resumes); to switch timing,
    give the new one and ``None`` for the old (``cron=None, every_s=60``)."""
    path = f"/api/schedules/{_id(schedule_id)}"
    return Call("PATCH", path, _json(models.Schedule), body=changes)


def delete_schedule(schedule_id: str) -> Call[dict[str, Any]]:
    return Call("DELETE", f"/api/schedules/{_id(schedule_id)}", _object)


def run_schedule(
    schedule_id: str, *, idempotency_key: str | None = None
) -> Call[models.RunStarted]:
    """Start the schedule's run now (a repeat with the same key starts nothing)."""
    headers = {"Idempotency-Key": idempotency_key} if idempotency_key else None
    path = f"/api/schedules/{_id(schedule_id)}/run"
    return Call("POST", path, _json(models.RunStarted), headers=headers)


def schedule_runs(schedule_id: str) -> Call[models.ScheduleRuns]:
    """The runs the schedule started, newest first, with their status now."""
    path = f"/api/schedules/{_id(schedule_id)}/runs"
    return Call("GET", path, _json(models.ScheduleRuns))


def create_trigger(name: str, template: Mapping[str, Any]) -> Call[models.TriggerCreated]:
    """A signed webhook starting ``template``; the answer's ``secret`` is shown only once."""
    body = {"name": name, "template": dict(template)}
    return Call("POST", "/api/triggers", _json(models.TriggerCreated), body=body)


def list_triggers() -> Call[models.TriggerList]:
    return Call("GET", "/api/triggers", _json(models.TriggerList))


def get_trigger(trigger_id: str) -> Call[models.Trigger]:
    return Call("GET", f"/api/triggers/{_id(trigger_id)}", _json(models.Trigger))


def delete_trigger(trigger_id: str) -> Call[dict[str, Any]]:
    return Call("DELETE", f"/api/triggers/{_id(trigger_id)}", _object)
