"""The asyncio client (``httpx.AsyncClient``): the same methods as :class:`Client`, awaited."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
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
    bind_async,
    failure,
    request_args,
)
from longhaul.client.models import Event, Trace

T = TypeVar("T")


class AsyncClient:
    """``AsyncClient(base_url=None, api_key=None)``: as :class:`longhaul.client.Client`,
    every method awaited and streams iterated with ``async for``."""

    def __init__(
        self,
        base_url: str | None = None,
        api_key: str | None = None,
        *,
        timeout: float | None = None,
        stream_attempts: int = STREAM_ATTEMPTS,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.settings = Settings.resolve(base_url, api_key, timeout)
        self.stream_attempts = stream_attempts
        self._http = httpx.AsyncClient(
            base_url=self.settings.base_url,
            headers=self.settings.headers,
            timeout=self.settings.timeout,
            transport=transport,
        )

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        await self._http.aclose()

    async def _send(self, call: Call[T]) -> T:
        try:
            response = await self._http.request(**request_args(call))
        except httpx.HTTPError as exc:
            raise failure(self.settings.base_url, exc) from exc
        return answer(call, response)

    info = bind_async(calls.info)
    start = bind_async(calls.start)
    create_trace = bind_async(calls.create_trace)
    list_traces = bind_async(calls.list_traces)
    get_trace = bind_async(calls.get_trace)
    create_eval = bind_async(calls.create_eval)
    task_from_trace = bind_async(calls.task_from_trace)
    list_evals = bind_async(calls.list_evals)
    get_eval = bind_async(calls.get_eval)
    start_eval_run = bind_async(calls.start_eval_run)
    record_eval_run = bind_async(calls.record_eval_run)
    eval_check = bind_async(calls.eval_check)
    messages = bind_async(calls.messages)
    context = bind_async(calls.context)
    notifications = bind_async(calls.notifications)
    upload_files = bind_async(calls.upload_files)
    run = bind_async(calls.run)
    send_message = bind_async(calls.send_message)
    stop = bind_async(calls.stop)
    delete = bind_async(calls.delete)
    export_trace = bind_async(calls.export_trace)
    import_trace = bind_async(calls.import_trace)
    resume = bind_async(calls.resume)
    reply = bind_async(calls.reply)
    approve = bind_async(calls.approve)
    inbox = bind_async(calls.inbox)
    usage = bind_async(calls.usage)
    answer_budget = bind_async(calls.answer_budget)
    budget_waits = bind_async(calls.budget_waits)
    tool_results = bind_async(calls.tool_results)
    reflect = bind_async(calls.reflect)
    compact = bind_async(calls.compact)
    create_task = bind_async(calls.create_task)
    list_tasks = bind_async(calls.list_tasks)
    get_task = bind_async(calls.get_task)
    resume_task = bind_async(calls.resume_task)
    delete_task = bind_async(calls.delete_task)
    list_keys = bind_async(calls.list_keys)
    erase_key = bind_async(calls.erase_key)
    task_checkpoints = bind_async(calls.task_checkpoints)
    clear_task_checkpoints = bind_async(calls.clear_task_checkpoints)
    review_plan = bind_async(calls.review_plan)
    list_experiences = bind_async(calls.list_experiences)
    get_experience = bind_async(calls.get_experience)
    export_experiences = bind_async(calls.export_experiences)
    import_experiences = bind_async(calls.import_experiences)
    create_schedule = bind_async(calls.create_schedule)
    list_schedules = bind_async(calls.list_schedules)
    get_schedule = bind_async(calls.get_schedule)
    update_schedule = bind_async(calls.update_schedule)
    delete_schedule = bind_async(calls.delete_schedule)
    run_schedule = bind_async(calls.run_schedule)
    schedule_runs = bind_async(calls.schedule_runs)
    create_trigger = bind_async(calls.create_trigger)
    list_triggers = bind_async(calls.list_triggers)
    get_trigger = bind_async(calls.get_trigger)
    delete_trigger = bind_async(calls.delete_trigger)

    def events(
        self, trace_id: str, *, after: int = 0, follow: bool = True, live: bool = True
    ) -> AsyncIterator[Event]:
        """The trace's events after stream sequence ``after``: stored events (``id`` set),
        token deltas (``live``) and ``subtree`` notices. A dropped connection is resumed
        from the last id seen, so nothing is lost or repeated. ``follow=False`` ends after
        the stored events; ``live=False`` leaves out the token deltas."""
        return self._stream(calls.trace_events_path(trace_id), after, follow, live)

    def task_events(
        self, task_id: str, *, after: int = 0, follow: bool = True
    ) -> AsyncIterator[Event]:
        """The task's events (plan, phases, replans, completion), as :meth:`events`."""
        return self._stream(calls.task_events_path(task_id), after, follow, live=False)

    async def wait(self, trace_id: str) -> Trace:
        """Follow the trace until it ends or waits for the client (a reply, an approval,
        tool results); returns it then."""
        trace = await self.get_trace(trace_id)
        if trace.is_final or trace.needs_client:
            return trace
        async for event in self.events(trace_id, after=trace.event_id, live=False):
            if event.ends_run:
                break
        return await self.get_trace(trace_id)

    async def _stream(
        self, path: str, after: int, follow: bool, live: bool
    ) -> AsyncIterator[Event]:
        resume = Resume(self.settings.base_url, after, follow, live, self.stream_attempts)
        while True:
            try:
                async with self._http.stream(**resume.stream_args(path)) as response:
                    if response.status_code >= 400:
                        await response.aread()
                    resume.opened(response)
                    if not resume.broken:
                        decoder = SseDecoder()
                        async for line in response.aiter_lines():
                            event = resume.take(decoder.feed(line))
                            if event is not None:
                                yield event
                if resume.ended():
                    return
            except (*CONNECT_ERRORS, *DROP_ERRORS) as exc:
                resume.dropped(exc)
            await asyncio.sleep(resume.delay())
