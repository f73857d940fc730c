"""A trace as an A2A task: the state mapping and the protobuf shapes ``a2a-sdk`` serves.

An A2A task *is* a trace (the task id is the trace id), so nothing here is stored: every
answer is folded from the log. The trace's outcome (``outcome.outcome_of``) decides the
state: a run that goes is ``working``; one waiting for a person is ``input-required`` (its
question as the status message; an approval or a client-tool wait names the viewer page,
where it is acted on); ``completed`` carries the answer as the ``answer`` artifact;
``failed`` the error; ``stopped`` is ``canceled``.
"""

from __future__ import annotations

from a2a.types.a2a_pb2 import (
    Artifact,
    Message,
    Part,
    Role,
    Task,
    TaskArtifactUpdateEvent,
    TaskState,
    TaskStatus,
    TaskStatusUpdateEvent,
)
from longhaul.domain.state import TraceState
from longhaul.gateway.protocols.run_outcome import PERSON_WAITS, RunOutcome, outcome_of, text_of

ANSWER = "answer"
"""The artifact id of a completed task's answer."""

_STATES = {
    "completed": TaskState.TASK_STATE_COMPLETED,
    "failed": TaskState.TASK_STATE_FAILED,
    "stopped": TaskState.TASK_STATE_CANCELED,
}


def task_state(outcome: RunOutcome) -> TaskState:
    if outcome.status in _STATES:
        return _STATES[outcome.status]
    if outcome.status == "waiting" and outcome.wait_reason in PERSON_WAITS:
        return TaskState.TASK_STATE_INPUT_REQUIRED
    return TaskState.TASK_STATE_WORKING


def agent_message(text: str, task_id: str, context_id: str, message_id: str) -> Message:
    return Message(
        message_id=message_id,
        task_id=task_id,
        context_id=context_id,
        role=Role.ROLE_AGENT,
        parts=[Part(text=text)],
    )


def _status_text(outcome: RunOutcome, viewer: str) -> str | None:
    """What the status message says: the question, the error, or where a person acts."""
    if outcome.question is not None:
        return outcome.question
    if outcome.status == "waiting" and outcome.wait_reason in PERSON_WAITS:
        return f"waits for {outcome.wait_reason}: act on it at {viewer}"
    if outcome.status in ("failed", "stopped"):
        return outcome.error or outcome.status
    return None


def task_status(state: TraceState, context_id: str, viewer: str) -> TaskStatus:
    outcome = outcome_of(state)
    status = TaskStatus(state=task_state(outcome))
    text = _status_text(outcome, viewer)
    if text is not None:
        message_id = f"{state.trace_id}-status-{state.stream_seq}"
        status.message.CopyFrom(agent_message(text, state.trace_id, context_id, message_id))
    return status


def answer_artifact(answer: str) -> Artifact:
    return Artifact(artifact_id=ANSWER, name=ANSWER, parts=[Part(text=answer)])


def _history(state: TraceState, context_id: str) -> list[Message]:
    """The conversation on the main path: user messages and the agent's texts."""
    messages = []
    for message in state.main_path():
        text = text_of(message.content)
        if message.role not in ("user", "assistant") or message.tool_calls or not text:
            continue
        role = Role.ROLE_USER if message.role == "user" else Role.ROLE_AGENT
        messages.append(
            Message(
                message_id=f"{state.trace_id}-{message.sequence}",
                task_id=state.trace_id,
                context_id=context_id,
                role=role,
                parts=[Part(text=text)],
            )
        )
    return messages


def task_of(
    state: TraceState, context_id: str, viewer: str, history_length: int | None = None
) -> Task:
    """The task as the protocol reports it (``history_length``: the last so many messages;
    ``None``: all of them)."""
    task = Task(
        id=state.trace_id, context_id=context_id, status=task_status(state, context_id, viewer)
    )
    outcome = outcome_of(state)
    if outcome.status == "completed" and outcome.answer:
        task.artifacts.append(answer_artifact(outcome.answer))
    history = _history(state, context_id)
    if history_length is not None:
        history = history[len(history) - history_length :] if history_length > 0 else []
    task.history.extend(history)
    return task


def status_update(state: TraceState, context_id: str, viewer: str) -> TaskStatusUpdateEvent:
    return TaskStatusUpdateEvent(
        task_id=state.trace_id,
        context_id=context_id,
        status=task_status(state, context_id, viewer),
    )


def progress_update(
    task_id: str, context_id: str, line: str, message_id: str
) -> TaskStatusUpdateEvent:
    """A step of a working run, as a ``working`` status with a one-line message."""
    return TaskStatusUpdateEvent(
        task_id=task_id,
        context_id=context_id,
        status=TaskStatus(
            state=TaskState.TASK_STATE_WORKING,
            message=agent_message(line, task_id, context_id, message_id),
        ),
    )


def artifact_update(task_id: str, context_id: str, answer: str) -> TaskArtifactUpdateEvent:
    return TaskArtifactUpdateEvent(
        task_id=task_id,
        context_id=context_id,
        artifact=answer_artifact(answer),
        last_chunk=True,
    )
