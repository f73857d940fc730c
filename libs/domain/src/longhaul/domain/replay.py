"""Replays: a run whose every model call is answered from an earlier, recorded trace.

``longhaul eval --replay`` checks a change to tools, middleware or prompts without a token:
each new run gets the recorded run's assistant turns back in order (the model string
``replay:<recorded trace id>``), so whatever differs comes from the harness, not from the
model. Pure: what a recorded trace family answers (:func:`recording`) and where a replay
first did something else than its record (:func:`divergence`). The executor plays the
recording; the CLI reports the divergence.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Protocol

from longhaul.domain.messages import ToolCall, content_text
from longhaul.domain.state.trace import Message, TraceState

REPLAY_PREFIX = "replay:"
Turn = dict[str, Any]


def replayed_trace(model_string: str) -> str | None:
    """The recorded trace a ``replay:<id>`` model string names (``None``: not a replay)."""
    if not model_string.startswith(REPLAY_PREFIX):
        return None
    return model_string.removeprefix(REPLAY_PREFIX) or None


def _prompt(path: Sequence[Message]) -> str | None:
    """The task a trace was given: its first user message the harness did not write."""
    for message in path:
        if message.role == "user" and not message.synthetic:
            return content_text(message.content)
    return None


def _turn(message: Message) -> Turn:
    turn: Turn = {"content": content_text(message.content)}
    if message.tool_calls:
        turn["tool_calls"] = [
            {"id": call.id, "name": call.name, "arguments": call.arguments}
            for call in message.tool_calls
        ]
    if message.finish_reason:
        turn["finish_reason"] = message.finish_reason
    return turn


def recorded_turns(state: TraceState) -> tuple[str, list[Turn]] | None:
    """A recorded trace's task and the turns its model answered, in order; ``None`` for a
    trace that was never given a task."""
    path = state.main_path()
    prompt = _prompt(path)
    if prompt is None:
        return None
    turns = [_turn(m) for m in path if m.role == "assistant" and m.branch_type == "main"]
    return prompt, turns


def recording(family: Iterable[TraceState]) -> dict[str, list[Turn]]:
    """Turns by task for a recorded trace and its sub-traces: a replayed sub-agent is found by
    the task its parent gives it (the first recording of a task wins)."""
    by_prompt: dict[str, list[Turn]] = {}
    for state in family:
        recorded = recorded_turns(state)
        if recorded is not None:
            by_prompt.setdefault(*recorded)
    return by_prompt


class _Said(Protocol):
    """A message as the API lists it (``longhaul.client.models.Message`` or the fold's)."""

    @property
    def role(self) -> str: ...
    @property
    def content(self) -> Any: ...
    @property
    def tool_call_id(self) -> str | None: ...
    @property
    def tool_calls(self) -> Sequence[Any] | None: ...


def _calls(messages: Sequence[_Said]) -> list[list[tuple[str, str]]]:
    """Per model call (assistant message), its tool calls as (id, name)."""
    calls: list[list[tuple[str, str]]] = []
    for message in messages:
        if message.role == "assistant":
            calls.append([_id_name(call) for call in message.tool_calls or ()])
    return calls


def _id_name(call: Any) -> tuple[str, str]:
    if isinstance(call, ToolCall):
        return call.id, call.name
    function = getattr(call, "function", None)
    name = getattr(function, "name", None) or getattr(call, "name", "")
    return str(getattr(call, "id", "")), str(name)


def _results(messages: Sequence[_Said]) -> Mapping[str, str]:
    return {
        m.tool_call_id: content_text(m.content)
        for m in messages
        if m.role == "tool" and m.tool_call_id is not None
    }


IDS = re.compile(
    r"\b(?:t_k[0-9a-f]{32}|[a-z]{1,8}_[0-9A-HJKMNP-TV-Z]{26}|(?:call|toolu|tool)_[A-Za-z0-9]{8,})\b"
)
"""Ids a run makes anew (a sub-agent's trace, a keyed trace, a tool call): a replay has its
own, so they are not what it is compared on."""


def normalised(text: str) -> str:
    """``text`` with every id a run makes anew written ``<id>``."""
    return IDS.sub("<id>", text)


def _short(text: str, limit: int = 160) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def divergence(recorded: Sequence[_Said], replayed: Sequence[_Said]) -> str | None:
    """Where the replay's main path first differs from the record's: a tool called or
    answered otherwise, or a different number of model calls. ``None``: it did the same.
    Calls are matched by their place, not their ids, and ids in what a tool answered are
    :func:`normalised` (a replay's sub-agent has a new trace id, and that is no change)."""
    before, after = _calls(recorded), _calls(replayed)
    answers_before, answers_after = _results(recorded), _results(replayed)
    for number, calls in enumerate(before, start=1):
        if number > len(after):
            return f"model call {number}: the replay ended after {len(after)} model calls"
        now = after[number - 1]
        if [name for _, name in now] != [name for _, name in calls]:
            names = ", ".join(name for _, name in now) or "no tool"
            recorded_names = ", ".join(name for _, name in calls) or "no tool"
            return f"model call {number}: called {names}, recorded {recorded_names}"
        for (old_id, name), (new_id, _) in zip(calls, now, strict=True):
            old, new = answers_before.get(old_id), answers_after.get(new_id)
            if normalised(old or "") != normalised(new or "") or (old is None) != (new is None):
                return (
                    f"model call {number}: {name} answered {_short(new or '(nothing)')!r}, "
                    f"recorded {_short(old or '(nothing)')!r}"
                )
    if len(after) > len(before):
        return f"the replay asked for {len(after)} model calls, the record has {len(before)}"
    return None
