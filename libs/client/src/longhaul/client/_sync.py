"""The blocking client (``httpx.Client``): for scripts, notebooks and threads."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import TypeVar

import httpx
from longhaul.client import _calls as calls
from longhaul.client._calls import Call
from longhaul.client._transport import (
    CONNECT_ERRORS,
    DROP_ERRORS,
    STREAM_ATTEMPTS,
    Resume,
    Settings,
    SseDecoder,
    answer,
    bind_sync,
    failure,
    request_args,
)
from longhaul.client.models import Event, Trace

T = TypeVar("T")


class Client:
    """``Client(base_url=None, api_key=None)``: both default to ``LONGHAUL_URL`` and
    ``LONGHAUL_API_KEY``. Use it as a context manager (or call :meth:`close`)."""

    def __init__(
        self,
        base_url: str | None = None,
        api_key: str | None = None,
        *,
        timeout: float | None = None,
        stream_attempts: int = STREAM_ATTEMPTS,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.settings = Settings.resolve(base_url, api_key, timeout)
        self.stream_attempts = stream_attempts
        self._http = httpx.Client(
            base_url=self.settings.base_url,
            headers=self.settings.headers,
            timeout=self.settings.timeout,
            transport=transport,
        )

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    def _send(self, call: Call[T]) -> T:
        try:
            response = self._http.request(**request_args(call))
        except httpx.HTTPError as exc:
            raise failure(self.settings.base_url, exc) from exc
        return answer(call, response)

    info = bind_sync(calls.info)
    start = bind_sync(calls.start)
    create_trace = bind_sync(calls.create_trace)
    list_traces = bind_sync(calls.list_traces)
    get_trace = bind_sync(calls.get_trace)
    create_eval = bind_sync(calls.create_eval)
    task_from_trace = bind_sync(calls.task_from_trace)
    list_evals = bind_sync(calls.list_evals)
    get_eval = bind_sync(calls.get_eval)
    start_eval_run = bind_sync(calls.start_eval_run)
    record_eval_run = bind_sync(calls.record_eval_run)
    eval_check = bind_sync(calls.eval_check)
    messages = bind_sync(calls.messages)
    context = bind_sync(calls.context)
    notifications = bind_sync(calls.notifications)
    upload_files = bind_sync(calls.upload_files)
    run = bind_sync(calls.run)
    send_message = bind_sync(calls.send_message)
    stop = bind_sync(calls.stop)
    delete = bind_sync(calls.delete)
    export_trace = bind_sync(calls.export_trace)
    import_trace = bind_sync(calls.import_trace)
    resume = bind_sync(calls.resume)
    reply = bind_sync(calls.reply)
    approve = bind_sync(calls.approve)
    inbox = bind_sync(calls.inbox)
    usage = bind_sync(calls.usage)
    answer_budget = bind_sync(calls.answer_budget)
    budget_waits = bind_sync(calls.budget_waits)
    tool_results = bind_sync(calls.tool_results)
    reflect = bind_sync(calls.reflect)
    compact = bind_sync(calls.compact)
    create_task = bind_sync(calls.create_task)
    list_tasks = bind_sync(calls.list_tasks)
    get_task = bind_sync(calls.get_task)
    resume_task = bind_sync(calls.resume_task)
    delete_task = bind_sync(calls.delete_task)
    list_keys = bind_sync(calls.list_keys)
    erase_key = bind_sync(calls.erase_key)
    task_checkpoints = bind_sync(calls.task_checkpoints)
    clear_task_checkpoints = bind_sync(calls.clear_task_checkpoints)
    review_plan = bind_sync(calls.review_plan)
    list_experiences = bind_sync(calls.list_experiences)
    get_experience = bind_sync(calls.get_experience)
    export_experiences = bind_sync(calls.export_experiences)
    import_experiences = bind_sync(calls.import_experiences)
    create_schedule = bind_sync(calls.create_schedule)
    list_schedules = bind_sync(calls.list_schedules)
    get_schedule = bind_sync(calls.get_schedule)
    update_schedule = bind_sync(calls.update_schedule)
    delete_schedule = bind_sync(calls.delete_schedule)
    run_schedule = bind_sync(calls.run_schedule)
    schedule_runs = bind_sync(calls.schedule_runs)
    create_trigger = bind_sync(calls.create_trigger)
    list_triggers = bind_sync(calls.list_triggers)
    get_trigger = bind_sync(calls.get_trigger)
    delete_trigger = bind_sync(calls.delete_trigger)

    def events(
        self, trace_id: str, *, after: int = 0, follow: bool = True, live: bool = True
    ) -> Iterator[Event]:
        """The trace's events after stream sequence ``after``: stored events (``id`` set),
        token deltas (``live``) and ``subtree`` notices. A dropped connection is resumed
        from the last id seen, so nothing is lost or repeated. ``follow=False`` ends after
        the stored events; ``live=False`` leaves out the token deltas."""
        return self._stream(calls.trace_events_path(trace_id), after, follow, live)

    def task_events(self, task_id: str, *, after: int = 0, follow: bool = True) -> Iterator[Event]:
        """The task's events (plan, phases, replans, completion), as :meth:`events`."""
        return self._stream(calls.task_events_path(task_id), after, follow, live=False)

    def wait(self, trace_id: str) -> Trace:
        """Follow the trace until it ends or waits for the client (a reply, an approval,
        tool results); returns it then."""
        trace = self.get_trace(trace_id)
        if trace.is_final or trace.needs_client:
            return trace
        for event in self.events(trace_id, after=trace.event_id, live=False):
            if event.ends_run:
                break
        return self.get_trace(trace_id)

    def _stream(self, path: str, after: int, follow: bool, live: bool) -> Iterator[Event]:
        resume = Resume(self.settings.base_url, after, follow, live, self.stream_attempts)
        while True:
            try:
                with self._http.stream(**resume.stream_args(path)) as response:
                    if response.status_code >= 400:
                        response.read()
                    resume.opened(response)
                    if not resume.broken:
                        decoder = SseDecoder()
                        for line in response.iter_lines():
                            event = resume.take(decoder.feed(line))
                            if event is not None:
                                yield event
                if resume.ended():
                    return
            except (*CONNECT_ERRORS, *DROP_ERRORS) as exc:
                resume.dropped(exc)
            time.sleep(resume.delay())
