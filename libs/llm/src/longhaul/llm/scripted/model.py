"""Offline, deterministic models: a script of turns, ``auto`` mode, or a Python callable.

A *turn* is ``{content?, tool_calls?: [{name, arguments, id?}], finish_reason?, usage?,
provider_fields?}``; ``arguments`` may be a dict or raw text (to test invalid JSON).
Turn N of a file script answers the request that already holds N assistant messages, so a
trace resumed after a crash, in another process, continues the script where the log says it
is. A file may also hold one script per prompt, ``{by_prompt: [{match: <regex>, turns:
[...]}, ...]}``: the first whose regex is found in the first user message plays (an eval
suite's tasks, or a parent and its sub-agents, on one deterministic model). Output is
streamed in small chunks so that every streaming code path runs offline too.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import re
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any, ClassVar

import yaml
from longhaul.domain.messages import content_text
from longhaul.llm.assembly import ResponseAssembler
from longhaul.llm.base import StreamingModel
from longhaul.llm.ids import new_call_id
from longhaul.llm.types import (
    ModelRequest,
    ModelResponse,
    StreamEvent,
    ToolCall,
    Usage,
)

Turn = dict[str, Any]
ScriptResult = ModelResponse | Turn
ScriptFn = Callable[[ModelRequest], ScriptResult | Awaitable[ScriptResult]]

EXHAUSTED = "script exhausted"
_TURN_KEYS = frozenset({"content", "tool_calls", "finish_reason", "usage", "provider_fields"})


def _check_turn(turn: Any, where: str) -> Turn:
    if not isinstance(turn, dict):
        raise ValueError(f"{where}: a turn must be a mapping, got {type(turn).__name__}")
    unknown = set(turn) - _TURN_KEYS
    if unknown:
        raise ValueError(f"{where}: unknown turn keys {sorted(unknown)}")
    for n, call in enumerate(turn.get("tool_calls") or ()):
        if not isinstance(call, dict) or not isinstance(call.get("name"), str):
            raise ValueError(f"{where}: tool_calls[{n}] needs a 'name'")
    return turn


class TurnScript:
    """A fixed list of turns, indexed by the number of assistant messages so far."""

    def __init__(self, turns: Sequence[Turn]) -> None:
        self.turns = [_check_turn(turn, f"turn {n}") for n, turn in enumerate(turns)]

    def __call__(self, request: ModelRequest) -> Turn:
        position = sum(1 for m in request.messages if m.get("role") == "assistant")
        return self.turns[position] if position < len(self.turns) else {"content": EXHAUSTED}


class PromptScript:
    """One :class:`TurnScript` per prompt: the first whose ``match`` regex is found in the
    request's first user message."""

    NO_MATCH: ClassVar[Turn] = {"content": "no script matches this prompt"}

    def __init__(self, entries: Sequence[Any]) -> None:
        self.entries: list[tuple[re.Pattern[str], TurnScript]] = []
        for n, entry in enumerate(entries):
            if not isinstance(entry, dict) or not isinstance(entry.get("match"), str):
                raise ValueError(f"by_prompt[{n}]: needs a 'match' regex and 'turns'")
            try:
                pattern = re.compile(entry["match"])
            except re.error as exc:
                raise ValueError(f"by_prompt[{n}].match: {exc}") from None
            self.entries.append((pattern, TurnScript(entry.get("turns") or [])))

    def __call__(self, request: ModelRequest) -> Turn:
        first = next((m for m in request.messages if m.get("role") == "user"), None)
        prompt = content_text(first.get("content")) if first is not None else ""
        for pattern, script in self.entries:
            if pattern.search(prompt):
                return script(request)
        return self.NO_MATCH


LOADED_SCRIPTS = 64
"""Script files kept parsed, by path and version (modification time and size)."""
_loaded: dict[tuple[str, int, int], TurnScript | PromptScript] = {}


def load_script(path: str | Path) -> TurnScript | PromptScript:
    """A YAML or JSON file holding a list of turns, or ``{by_prompt: [...]}``. Parsed once
    per version of the file: an executor resolves a trace's model every turn, and parsing a
    30-turn script took 21 ms, more than the steps it scripts."""
    stat = Path(path).stat()
    key = (str(path), stat.st_mtime_ns, stat.st_size)
    script = _loaded.get(key)
    if script is None:
        script = _parse_script(path)
        if len(_loaded) >= LOADED_SCRIPTS:
            _loaded.clear()
        _loaded[key] = script
    return script


def _parse_script(path: str | Path) -> TurnScript | PromptScript:
    try:
        data = yaml.safe_load(Path(path).read_text())
    except (yaml.YAMLError, UnicodeDecodeError) as exc:
        # The parser's message quotes the offending line: never hand file content back.
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        raise ValueError(f"{Path(path).name}: not a valid YAML/JSON script{where}") from None
    if isinstance(data, dict) and isinstance(data.get("by_prompt"), list):
        return PromptScript(data["by_prompt"])
    if not isinstance(data, list):
        raise ValueError(f"{path}: a script is a list of turns, got {type(data).__name__}")
    return TurnScript(data)


def _to_response(result: ScriptResult, request: ModelRequest) -> ModelResponse:
    if isinstance(result, ModelResponse):
        return result
    turn = _check_turn(result, "scripted turn")
    calls = []
    for n, call in enumerate(turn.get("tool_calls") or ()):
        arguments = call.get("arguments", {})
        raw = arguments if isinstance(arguments, str) else json.dumps(arguments)
        call_id = call.get("id") or new_call_id(request.messages, n, call["name"], raw)
        calls.append(ToolCall.of(id=call_id, name=call["name"], arguments=raw))
    return ModelResponse(
        content=turn.get("content") or "",
        tool_calls=calls,
        usage=Usage(**turn["usage"]) if turn.get("usage") else Usage(),
        finish_reason=turn.get("finish_reason") or ("tool_calls" if calls else "stop"),
        provider_fields=turn.get("provider_fields") or {},
    )


def _chunks(text: str, size: int) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)]


class ScriptedModel(StreamingModel):
    """``script`` is a callable (sync or async) returning a turn or a ModelResponse, or a list
    of turns. ``latency_s`` delays each call; ``chunk_chars`` sizes the streamed pieces."""

    def __init__(
        self,
        script: ScriptFn | Sequence[Turn],
        *,
        name: str = "scripted:custom",
        latency_s: float = 0.0,
        chunk_chars: int = 8,
    ) -> None:
        self.name = name
        self._script: ScriptFn = script if callable(script) else TurnScript(script)
        self.latency_s = latency_s
        self.chunk_chars = max(chunk_chars, 1)

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        if self.latency_s > 0:
            await asyncio.sleep(self.latency_s)
        result = self._script(request)
        if inspect.isawaitable(result):
            result = await result
        response = _to_response(result, request)
        assembler = ResponseAssembler(request, self.name)
        for piece in _chunks(response.content, self.chunk_chars):
            yield assembler.text(piece)
        for index, call in enumerate(response.tool_calls):
            yield assembler.tool_call(index, id=call.id, name=call.name)
            for piece in _chunks(call.arguments, self.chunk_chars):
                yield assembler.tool_call(index, arguments=piece)
        given = response.usage if response.usage != Usage() else None
        yield assembler.finish(
            finish_reason=response.finish_reason,
            usage=given,
            provider_fields=response.provider_fields,
        )
