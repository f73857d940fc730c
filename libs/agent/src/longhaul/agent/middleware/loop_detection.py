"""LoopDetection (after_model + wrap_model_call): an agent repeating itself is stopped.

Layer 1: each call is hashed as (tool name, arguments as sorted JSON) into a sliding window of
the last ``window_size`` calls. When a hash reaches ``threshold`` occurrences (the 2nd
identical call) ``LoopWarned`` is recorded; the warning rides at the END of the next request
(never between a call and its results) until the next assistant message. One more (the 3rd)
stops the trace: ``LoopStopped`` + ``Stopped(reason="loop_detected")``.
Layer 2: calls per tool name — a warning at ``tool_freq_warn`` (30), a stop at
``tool_freq_stop`` (50).

Both layers count since the last message a person wrote (a new instruction starts afresh) and
are rebuilt from the path at the start of each turn, so a loop that straddles a crash or a
wait is still seen.
"""

from __future__ import annotations

import hashlib
from collections import Counter, deque
from dataclasses import dataclass, field

import msgspec
from longhaul.agent.middleware.base import Middleware, ModelHandler
from longhaul.agent.turn import Step, Turn
from longhaul.domain.config import LoopDetectionConfig
from longhaul.domain.events import LoopStopped, LoopWarned
from longhaul.domain.state import TraceState
from longhaul.llm.types import ModelRequest, ModelResponse

_CANONICAL = msgspec.json.Encoder(order="sorted")
"""Keys sorted at every depth: the same arguments in another order are the same call."""


def call_key(name: str, arguments: str) -> str:
    """The call's hash (name and arguments as canonical JSON); msgspec, not ``json``: it is
    computed for every call of every step (about 20 µs a call with ``json``, 3 with this)."""
    try:
        canonical = _CANONICAL.encode(msgspec.json.decode(arguments or "{}"))
    except msgspec.DecodeError:
        canonical = arguments.encode()
    return hashlib.sha256(name.encode() + b"\0" + canonical).hexdigest()


@dataclass
class _Window:
    recent: deque[str]
    per_tool: Counter[str] = field(default_factory=Counter)


def _rebuild(state: TraceState, config: LoopDetectionConfig) -> _Window:
    """Calls since the last human message on the path, oldest first."""
    calls: list[tuple[str, str]] = []
    for seq in reversed(state.path):
        message = state.messages[seq]
        if message.role == "user" and not message.synthetic:
            break
        if message.role == "assistant" and message.tool_calls:
            calls.extend(
                (call.function.name, call.function.arguments)
                for call in reversed(message.tool_calls)
            )
    calls.reverse()
    window = _Window(recent=deque(maxlen=config.window_size))
    for name, arguments in calls:
        window.recent.append(call_key(name, arguments))
        window.per_tool[name] += 1
    return window


def _repeating(name: str, count: int) -> str:
    return (
        f"You are repeating {name} with the same arguments ({count} times in the last calls). "
        "That will not give a different result: change strategy."
    )


def _frequent(name: str, count: int) -> str:
    return (
        f"You have called {name} {count} times since the last instruction. Step back and "
        "check that your approach is converging."
    )


class LoopDetection(Middleware):
    async def after_model(self, turn: Turn, step: Step) -> None:
        config = turn.config.loop_detection
        window = turn.local(self, lambda: _rebuild(turn.state, config))
        for call in step.calls:
            key = call_key(call.name, call.arguments)
            window.recent.append(key)
            window.per_tool[call.name] += 1
            repeats = window.recent.count(key)
            uses = window.per_tool[call.name]
            if repeats > config.threshold or uses >= config.tool_freq_stop:
                why = (
                    f"{call.name} repeated {repeats} times with the same arguments"
                    if repeats > config.threshold
                    else f"{call.name} called {uses} times since the last instruction"
                )
                step.events.append(LoopStopped(tool=call.name, message=f"loop detected: {why}"))
                turn.stop("loop_detected")
                return
            if repeats == config.threshold:
                message = _repeating(call.name, repeats)
                step.events.append(LoopWarned(tool=call.name, count=repeats, message=message))
            elif uses == config.tool_freq_warn:
                message = _frequent(call.name, uses)
                step.events.append(LoopWarned(tool=call.name, count=uses, message=message))

    async def wrap_model_call(
        self, turn: Turn, request: ModelRequest, call_next: ModelHandler
    ) -> ModelResponse:
        warnings = turn.state.pending_warnings
        if warnings:
            warning = {"role": "user", "content": "\n".join(warnings)}
            messages = [*request.messages, warning]  # a copy: the view is the history
            request = msgspec.structs.replace(request, messages=messages)
        return await call_next(request)
