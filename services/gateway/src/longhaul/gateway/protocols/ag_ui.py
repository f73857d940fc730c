"""``POST /ag-ui``: the AG-UI event protocol front ends (CopilotKit and others) speak, over the
``ag-ui-protocol`` package's types and encoder.

A request is a ``RunAgentInput``; the answer is an SSE stream of AG-UI events: ``RUN_STARTED``,
a ``STATE_SNAPSHOT`` of the trace (status and goal tree; again whenever the goals change and
at the end), the model's text as ``TEXT_MESSAGE_START/CONTENT/END`` (live token deltas), its
tool calls as ``TOOL_CALL_START/ARGS/END`` and their results as ``TOOL_CALL_RESULT``, and one
closing event: ``RUN_FINISHED`` (outcome ``success``; ``interrupt`` when the run waits for a
person; ``cancelled`` when it was stopped) or ``RUN_ERROR`` when it failed.

**Threads.** A thread is one durable trace per API key: its id is derived from the key's owner
and the ``threadId`` (``commands.keyed_trace_id``), so another key's thread of the same name is
another trace. The first input starts the trace with its messages (``context`` entries as
system messages); a later one continues it with the messages that follow the last one this
endpoint took (recorded in the workspace KV, ``ag-ui/<owner>/<trace>``, removed with the
trace). An input with nothing new re-attaches: a ``MESSAGES_SNAPSHOT`` of the trace, then the
run's events from where it stands.

**Interrupts.** A run waiting for a person ends with ``RUN_FINISHED`` whose outcome lists what
it waits for: ``approval:<tool call id>`` (payload ``true``/``false`` or ``{approved, reason,
arguments}``; ``cancelled`` denies) and ``question:<tool call id>`` (payload the answer, a
string or ``{answer}``; ``cancelled`` stops the run). The next input's ``resume`` entries
answer them and the same trace goes on. A new user message answers a question too.

``forwardedProps`` may name the new trace's ``model``, ``preset`` and ``approval`` tools, and
``auto_execute_tools: false`` hands every tool call to the front end (the run finishes with
``pendingToolCallIds``; the next input's tool messages are the results); the input's
``state`` is not read (the state is the trace's). Client-side ``tools`` are refused
(422): the model cannot call them yet. A run still going after
``gateway.completion_timeout_s`` ends the stream with ``RUN_FINISHED`` whose result says
``running``; an input with nothing new follows it again.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import msgspec
from ag_ui.core import (
    AssistantMessage,
    BaseEvent,
    DataSource,
    FunctionCall,
    ImagePart,
    Interrupt,
    Message,
    MessagesSnapshotEvent,
    ResumeEntry,
    RunAgentInput,
    RunErrorEvent,
    RunFinishedCancelledOutcome,
    RunFinishedEvent,
    RunFinishedInterruptOutcome,
    RunFinishedSuccessOutcome,
    RunStartedEvent,
    StateSnapshotEvent,
    SystemMessage,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
    TextPart,
    ToolCall,
    ToolCallArgsEvent,
    ToolCallEndEvent,
    ToolCallResultEvent,
    ToolCallStartEvent,
    ToolMessage,
    UrlSource,
    UserMessage,
)
from ag_ui.encoder import EventEncoder
from fastapi import APIRouter, Request, Response
from longhaul.agent.contract import LiveUpdate
from longhaul.domain import events as ev
from longhaul.domain.state import TraceState
from longhaul.gateway import access, commands
from longhaul.gateway.auth import CurrentPrincipal, Principal
from longhaul.gateway.deps import CurrentRuntime
from longhaul.gateway.errors import ERROR_RESPONSES, ApiError
from longhaul.gateway.protocols.run_outcome import (
    RunFollower,
    decoded,
    outcome_of,
    text_of,
    viewer_link,
)
from longhaul.gateway.runtime import Runtime
from longhaul.gateway.schemas.traces import (
    ApproveRequest,
    ChatMessage,
    CreateTraceRequest,
    RunRequest,
    ToolResultsRequest,
)
from longhaul.gateway.sse_schema import data_events
from longhaul.gateway.streams import ClosingStreamingResponse
from longhaul.gateway.usecases import steering
from longhaul.gateway.usecases.start import start_trace
from longhaul.gateway.views import goal_tree
from pydantic import TypeAdapter, ValidationError

PATH = "/ag-ui"
TRACE_HEADER = "X-Longhaul-Trace-Id"
_OPTIONS = ("model", "preset", "approval", "auto_execute_tools")
"""What ``forwardedProps`` may set on a new trace."""

APPROVAL_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "approved": {"type": "boolean"},
        "reason": {"type": "string"},
        "arguments": {"type": "object"},
    },
    "required": ["approved"],
}
QUESTION_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"answer": {"type": "string"}},
    "required": ["answer"],
}

router = APIRouter(tags=["ag-ui"])
_messages = TypeAdapter(list[ChatMessage])


def _invalid(exc: ValidationError, what: str) -> ApiError:
    errors = exc.errors(include_url=False, include_context=False, include_input=False)
    return ApiError(422, "invalid_request", f"{what}: {errors[0]['msg']}", errors)


# ---------------------------------------------------------------- input


def _content(message: Message) -> str | list[dict[str, Any]]:
    """An AG-UI message's content as a chat message carries it: text, or text and image parts
    (an image by URL or as a ``data:`` URL)."""
    content = message.content
    if content is None or isinstance(content, str):
        return content or ""
    parts: list[dict[str, Any]] = []
    for part in content:
        if isinstance(part, TextPart):
            parts.append({"type": "text", "text": part.text})
        elif isinstance(part, ImagePart) and isinstance(part.source, UrlSource | DataSource):
            url = part.source.value
            if isinstance(part.source, DataSource):
                url = f"data:{part.source.mime_type};base64,{url}"
            parts.append({"type": "image_url", "image_url": {"url": url}})
        else:
            kind = getattr(part, "type", "string")
            raise ApiError(
                422, "invalid_request", f"message {message.id}: a {kind} part is not taken"
            )
    return parts


def _chat(messages: list[Message]) -> list[ChatMessage]:
    """The AG-UI messages as the trace takes them (``developer`` is read as ``system``;
    activity and reasoning messages are the front end's own and are left out)."""
    raw: list[dict[str, Any]] = []
    for message in messages:
        if isinstance(message, UserMessage | SystemMessage):
            raw.append({"role": message.role, "content": _content(message)})
        elif message.role == "developer":
            raw.append({"role": "system", "content": message.content})
        elif isinstance(message, AssistantMessage):
            calls = [
                {"id": c.id, "function": c.function.model_dump()} for c in message.tool_calls or []
            ]
            raw.append(
                {"role": "assistant", "content": message.content, "tool_calls": calls or None}
            )
        elif isinstance(message, ToolMessage):
            raw.append(
                {
                    "role": "tool",
                    "content": _content(message),
                    "tool_call_id": message.tool_call_id,
                }
            )
    try:
        return _messages.validate_python(raw)
    except ValidationError as exc:
        raise _invalid(exc, "messages") from None


def _creation(body: RunAgentInput, messages: list[ChatMessage]) -> CreateTraceRequest:
    props = body.forwarded_props if isinstance(body.forwarded_props, dict) else {}
    options = {name: props[name] for name in _OPTIONS if props.get(name) is not None}
    if isinstance(options.get("approval"), list | str):
        options["approval"] = {"tools": options["approval"]}
    context = [
        {"role": "system", "content": f"{c.description}: {c.value}"} for c in body.context or []
    ]
    try:
        return CreateTraceRequest.model_validate(
            {"messages": [*context, *messages], **options, "name": None}
        )
    except ValidationError as exc:
        raise _invalid(exc, "the run's options") from None


def _new_messages(body: RunAgentInput, last_taken: str | None) -> list[Message]:
    """The input's messages after the last one this endpoint took; when that one is not in the
    input (a front end that trimmed its history), the user and tool messages after the last
    assistant message."""
    ids = [m.id for m in body.messages]
    if last_taken in ids:
        return body.messages[ids.index(last_taken) + 1 :]
    tail: list[Message] = []
    for message in reversed(body.messages):
        if message.role == "assistant":
            break
        tail.insert(0, message)
    return tail


# ---------------------------------------------------------------- threads


def _record_key(principal: Principal, trace_id: str) -> str:
    return f"ag-ui/{principal.owner}/{trace_id}"


async def _last_taken(runtime: Runtime, principal: Principal, trace_id: str) -> str | None:
    async with runtime.nats_call():
        entry = await runtime.service.workspace.get(_record_key(principal, trace_id))
    return None if entry is None else entry.value.decode()


async def _took(runtime: Runtime, principal: Principal, trace_id: str, body: RunAgentInput) -> None:
    if body.messages:
        async with runtime.nats_call():
            await runtime.service.workspace.put(
                _record_key(principal, trace_id), body.messages[-1].id.encode()
            )


class _Begun(msgspec.Struct):
    trace_id: str
    after: int
    follow: bool
    """False: the run has settled and nothing new was asked (re-attached)."""
    reattached: bool


async def _begin(runtime: Runtime, principal: Principal, body: RunAgentInput) -> _Begun:
    """Start the thread's trace, answer its interrupts, or continue it with what is new."""
    if body.tools:
        raise ApiError(
            422,
            "tools_not_supported",
            "client-side tools are not supported on /ag-ui: the agent runs its own tools",
        )
    trace_id = commands.keyed_trace_id(principal.owner, f"ag-ui:{body.thread_id}")
    if await commands.keyed_creation(runtime, principal, trace_id) is None:
        if body.resume:
            raise ApiError(409, "nothing_to_resume", f"thread {body.thread_id!r} has no run")
        if not body.messages:
            raise ApiError(422, "invalid_request", "a new thread needs at least one message")
        create = _creation(body, _chat(body.messages))
        state = await start_trace(runtime, principal, create, trace_id)
        await _took(runtime, principal, trace_id, body)
        return _Begun(trace_id, state.stream_seq, True, False)
    state = await access.owned_trace(runtime, principal, trace_id)
    if body.resume:
        after = await _resume(runtime, principal, state, body.resume)
        await _took(runtime, principal, trace_id, body)
        return _Begun(trace_id, after, True, False)
    new = _new_messages(body, await _last_taken(runtime, principal, trace_id))
    if not new:
        return _Begun(trace_id, state.stream_seq, not outcome_of(state).settled, True)
    after = await _continue(runtime, principal, state, _chat(new))
    await _took(runtime, principal, trace_id, body)
    return _Begun(trace_id, after, True, False)


async def _continue(
    runtime: Runtime, principal: Principal, state: TraceState, messages: list[ChatMessage]
) -> int:
    """Hand the thread's new messages to its trace: a question's answer, client tool results,
    or a new turn. Returns the sequence to follow from."""
    trace_id = state.trace_id
    results = [m for m in messages if m.role == "tool"]
    if results and state.wait_reason == "client_tools":
        posted = [{"tool_call_id": m.tool_call_id, "content": text_of(m.content)} for m in results]
        try:
            checked = ToolResultsRequest.model_validate({"results": posted})
        except ValidationError as exc:
            raise _invalid(exc, "tool results") from None
        _, seq = await steering.post_tool_results(runtime, principal, trace_id, checked)
        return seq
    turn: list[ChatMessage] = [m for m in messages if m.role in ("user", "system")]
    if not turn:
        raise ApiError(422, "invalid_request", "nothing new to run: send a user message")
    if state.status == "waiting" and state.wait_reason == "human":
        answer = "\n\n".join(text_of(m.content) for m in turn)
        _, seq = await steering.reply(runtime, principal, trace_id, answer)
        return seq
    _, seq = await steering.continue_run(runtime, principal, trace_id, RunRequest(messages=turn))
    return seq


async def _resume(
    runtime: Runtime, principal: Principal, state: TraceState, entries: list[ResumeEntry]
) -> int:
    """Answer the interrupts the last run ended with; returns the sequence to follow from."""
    pending = {i.id for i in interrupts(state)}
    for entry in entries:
        if entry.interrupt_id not in pending:
            raise ApiError(
                409,
                "interrupt_not_pending",
                f"interrupt {entry.interrupt_id!r} is not pending on this thread "
                f"(pending: {sorted(pending) or 'none'})",
            )
    # every answer is checked before the first is applied: a bad one changes nothing
    steps = [_answer(state.trace_id, entry) for entry in entries]
    seqs = [(await step(runtime, principal))[1] for step in steps]
    return seqs[0]


Step = Callable[[Runtime, Principal], Awaitable[steering.Steered]]


def _answer(trace_id: str, entry: ResumeEntry) -> Step:
    """What answering one interrupt appends (checked now, applied by the caller)."""
    kind, _, call_id = entry.interrupt_id.partition(":")
    if kind == "approval":
        decision = _decision(call_id, entry)
        return lambda runtime, principal: steering.decide_call(
            runtime, principal, trace_id, decision
        )
    if entry.status == "cancelled":
        return lambda runtime, principal: steering.stop(runtime, principal, trace_id)
    payload = entry.payload
    answer = payload.get("answer") if isinstance(payload, dict) else payload
    if not isinstance(answer, str) or not answer:
        raise ApiError(
            422,
            "invalid_request",
            f"{entry.interrupt_id}: the payload is the answer (a string or {{answer}})",
        )
    return lambda runtime, principal: steering.reply(runtime, principal, trace_id, answer)


def _decision(call_id: str, entry: ResumeEntry) -> ApproveRequest:
    payload = entry.payload
    fields: dict[str, Any] = dict(payload) if isinstance(payload, dict) else {}
    if isinstance(payload, bool):
        fields["approved"] = payload
    fields.setdefault("approved", entry.status == "resolved")
    if entry.status == "cancelled":
        fields["approved"] = False
    try:
        return ApproveRequest.model_validate({**fields, "tool_call_id": call_id})
    except ValidationError as exc:
        raise _invalid(exc, entry.interrupt_id) from None


# ---------------------------------------------------------------- output


def interrupts(state: TraceState) -> list[Interrupt]:
    """What a run waiting for a person waits for, as AG-UI interrupts."""
    if state.status != "waiting":
        return []
    if state.wait_reason == "human":
        call = state.wait_tool_call_id or ""
        return [
            Interrupt(
                id=f"question:{call}",
                reason="question",
                message=state.wait_detail,
                tool_call_id=call or None,
                response_schema=QUESTION_SCHEMA,
            )
        ]
    if state.wait_reason != "approval":
        return []
    calls = {c.id: c for m in state.main_path() for c in m.tool_calls or []}
    found = []
    for call_id in state.approval_pending:
        pending = calls.get(call_id)
        found.append(
            Interrupt(
                id=f"approval:{call_id}",
                reason="approval",
                message=None
                if pending is None
                else f"approve {pending.function.name}({pending.function.arguments})?",
                tool_call_id=call_id,
                response_schema=APPROVAL_SCHEMA,
            )
        )
    return found


def _snapshot(state: TraceState) -> StateSnapshotEvent:
    completed = state.status == "completed"
    return StateSnapshotEvent(
        snapshot={
            "trace_id": state.trace_id,
            "status": state.status or "running",
            "wait_reason": state.wait_reason if state.status == "waiting" else None,
            "goal_tree": goal_tree(state.goals, completed=completed).model_dump(mode="json"),
        }
    )


def _message_id(trace_id: str, sequence: int) -> str:
    return f"{trace_id}-{sequence}"


def _history(state: TraceState) -> list[Message]:
    """The trace's main path as AG-UI messages (a re-attaching front end's snapshot)."""
    out: list[Message] = []
    for message in state.main_path():
        mid = _message_id(state.trace_id, message.sequence)
        text = text_of(message.content)
        if message.role == "assistant":
            calls = [
                ToolCall(
                    id=c.id,
                    function=FunctionCall(name=c.function.name, arguments=c.function.arguments),
                )
                for c in message.tool_calls or []
            ]
            out.append(AssistantMessage(id=mid, content=text or None, tool_calls=calls or None))
        elif message.role == "tool":
            out.append(ToolMessage(id=mid, content=text, tool_call_id=message.tool_call_id or ""))
        elif message.role == "user":
            out.append(UserMessage(id=mid, content=text))
        else:
            out.append(SystemMessage(id=mid, content=text))
    return out


def _closing(state: TraceState, body: RunAgentInput, link: str) -> BaseEvent:
    """``RUN_FINISHED`` with the run's outcome, or ``RUN_ERROR`` when it failed."""
    outcome = outcome_of(state)
    if outcome.status == "failed":
        return RunErrorEvent(
            message=f"the run failed ({state.error}); trace {state.trace_id}: {link}",
            code=state.stop_reason or "run_failed",
        )
    result = {"trace_id": state.trace_id, "status": outcome.status, "viewer": link}
    waiting = interrupts(state)
    finished: Any = RunFinishedSuccessOutcome()
    if waiting:
        finished = RunFinishedInterruptOutcome(interrupts=waiting)
    elif outcome.status == "stopped":
        finished = RunFinishedCancelledOutcome()
    elif outcome.status == "waiting" and outcome.wait_reason == "client_tools":
        finished = RunFinishedSuccessOutcome(pending_tool_call_ids=state.client_pending)
    return RunFinishedEvent(
        thread_id=body.thread_id, run_id=body.run_id, result=result, outcome=finished
    )


class _Translator:
    """The trace's stored events and live deltas as AG-UI events. Streamed text opens a
    message at its first delta; the stored assistant message closes it (adding what the
    deltas missed). Deltas travel apart from the log and can overtake the results of the
    calls before them: they are held until those results are out, so a front end sees
    every call's result before the text that follows it."""

    def __init__(self, trace_id: str) -> None:
        self.trace_id = trace_id
        self.open: str | None = None
        self.streamed = ""
        self.unanswered: set[str] = set()
        self.held: list[str] = []

    def delta(self, text: str) -> list[BaseEvent]:
        if self.unanswered:
            self.held.append(text)
            return []
        out: list[BaseEvent] = []
        if self.open is None:
            self.open = f"{self.trace_id}-live-{uuid.uuid4().hex[:12]}"
            out.append(TextMessageStartEvent(message_id=self.open))
        self.streamed += text
        out.append(TextMessageContentEvent(message_id=self.open, delta=text))
        return out

    def message(self, event: ev.MessageAppended) -> list[BaseEvent]:
        if event.role == "tool":
            self.unanswered.discard(event.tool_call_id or "")
            out: list[BaseEvent] = [
                ToolCallResultEvent(
                    message_id=_message_id(self.trace_id, event.sequence),
                    tool_call_id=event.tool_call_id or "",
                    content=text_of(event.content),
                )
            ]
            if not self.unanswered:
                held, self.held = "".join(self.held), []
                out.extend(self.delta(held) if held else [])
            return out
        if event.role != "assistant":
            return []
        self.held = []  # the stored message carries all of it
        out = []
        whole = text_of(event.content)
        message_id = self.open or _message_id(self.trace_id, event.sequence)
        rest = whole[len(self.streamed) :] if whole.startswith(self.streamed) else ""
        if self.open is None and whole:
            out.append(TextMessageStartEvent(message_id=message_id))
        if rest:
            out.append(TextMessageContentEvent(message_id=message_id, delta=rest))
        if self.open is not None or whole:
            out.append(TextMessageEndEvent(message_id=message_id))
        self.open, self.streamed = None, ""
        for call in event.tool_calls or []:
            self.unanswered.add(call.id)
            out.append(
                ToolCallStartEvent(
                    tool_call_id=call.id,
                    tool_call_name=call.function.name,
                    parent_message_id=message_id,
                )
            )
            if call.function.arguments:
                out.append(ToolCallArgsEvent(tool_call_id=call.id, delta=call.function.arguments))
            out.append(ToolCallEndEvent(tool_call_id=call.id))
        return out


async def _events(
    follower: RunFollower,
    principal: Principal,
    body: RunAgentInput,
    begun: _Begun,
    link: str,
) -> AsyncIterator[BaseEvent | None]:
    """The run's AG-UI events (``None``: a heartbeat, sent as an SSE comment)."""
    runtime, trace_id = follower.runtime, begun.trace_id
    yield RunStartedEvent(thread_id=body.thread_id, run_id=body.run_id)
    try:
        state = await access.owned_trace(runtime, principal, trace_id)
        yield _snapshot(state)
        if begun.reattached:
            yield MessagesSnapshotEvent(messages=_history(state))
        if begun.follow:
            translate = _Translator(trace_id)
            items = follower.items(trace_id, begun.after, live=True)
            async with contextlib.aclosing(items):
                async for item in items:
                    if item.kind == "heartbeat":
                        yield None
                    elif item.kind == "live":
                        update = msgspec.json.decode(item.data, type=LiveUpdate)
                        if update.kind == "delta" and update.text:
                            for out in translate.delta(update.text):
                                yield out
                    elif isinstance(event := decoded(item), ev.MessageAppended):
                        for out in translate.message(event):
                            yield out
                    elif isinstance(event, ev.GoalChanged):
                        yield _snapshot(await access.owned_trace(runtime, principal, trace_id))
            state = await access.owned_trace(runtime, principal, trace_id)
            yield _snapshot(state)
        yield _closing(state, body, link)
    except (ApiError, ConnectionError) as exc:
        code = exc.code if isinstance(exc, ApiError) else "unavailable"
        yield RunErrorEvent(message=str(exc), code=code)


async def _encoded(events: AsyncIterator[BaseEvent | None]) -> AsyncIterator[bytes]:
    encoder = EventEncoder()
    async with contextlib.aclosing(events):  # type: ignore[type-var]
        async for event in events:
            yield b": keepalive\n\n" if event is None else encoder.encode(event).encode()


@router.post(
    PATH,
    summary="An AG-UI run: RunAgentInput in, AG-UI events out (SSE)",
    response_class=Response,
    responses={
        200: {
            "description": "AG-UI events, one per SSE event",
            "content": data_events("an AG-UI event (JSON)"),
        },
        **ERROR_RESPONSES,
    },
)
async def run_agent(
    body: RunAgentInput,
    request: Request,
    runtime: CurrentRuntime,
    principal: CurrentPrincipal,
) -> Response:
    begun = await _begin(runtime, principal, body)
    link = viewer_link(str(request.base_url), begun.trace_id)
    events = _events(RunFollower(runtime), principal, body, begun, link)
    return ClosingStreamingResponse(
        _encoded(events),
        media_type=EventEncoder().get_content_type(),
        headers={TRACE_HEADER: begun.trace_id, "Cache-Control": "no-cache"},
    )
