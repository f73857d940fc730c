"""Summarization (before_model): keep the request inside the model's context window.

Trigger: the estimated request exceeds ``headroom_threshold`` of the model's context limit and
``min_tokens`` — except that a window no larger than ``min_tokens`` is judged by the ratio
alone (a 7k request in an 8k window must shrink however small it is). ``compact_requested``
forces level 2.

Level 1 (request only, nothing persisted, on every step): the messages of each completed goal
are folded into one assistant note carrying the goal's summary (the model's own words about
it), placed where the goal's first message
was; an assistant message always goes together with its tool results, the last tool group is
always kept. It changes the prompt prefix once per completed goal (the planned break: a goal
boundary), and what it removes stays on the log and in the viewer.
Level 2 (persisted): the utility model summarises what the model has already acted on, between
the task's opening messages and the kept tail (``kept_tail``: the tool group in progress and a
client message the model has not answered yet, never summarised away), as a small agent on a
side branch (``engine.compaction``: the goal tree's full view, up to five rounds, read-only
tools; the branch stays in the tree, off the main path); the summary is appended
with ``branch_type="compression"`` under the last opening message and the kept tail is
appended again under it verbatim, so the fold makes the copy's end the new head and the
covered range falls off the main path; ``Compacted`` records the range. When the trace's owner
has an experience store, level 2 first runs a reflection (a multi-round side branch with the
read-only tools, ``engine.reflection``) over the raw messages, once per turn, so what they
taught is kept as experiences before they leave the context. If the summariser
fails the step goes on uncompressed and a
warning is logged and shown on the live stream.

Estimates are incremental (see ``History``): no step re-tokenises the history.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import dataclass

from longhaul.agent.contract import LiveUpdate
from longhaul.agent.history import History, message_tokens
from longhaul.agent.middleware.base import Middleware
from longhaul.agent.turn import Turn
from longhaul.domain.config import CompressionConfig
from longhaul.domain.events import Compacted, Goal
from longhaul.domain.state import TraceState
from longhaul.llm.estimate import estimate_tokens
from longhaul.llm.pricing import context_limit
from longhaul.llm.prompt import goal_note
from longhaul.llm.types import ChatMessage, ModelError, ModelRequest

log = logging.getLogger(__name__)

ContextLimit = Callable[[str], int]


@dataclass
class _Memo:
    overhead: int | None = None
    limit: tuple[str, int] | None = None
    """The model and its context limit (looked up in the price tables once a turn, not once
    a step; again if a fallback changes the model)."""
    summariser_failed: bool = False
    reflected: bool = False
    opening_warned: bool = False


def should_compress(tokens: int, limit: int, config: CompressionConfig) -> bool:
    over_ratio = tokens > config.headroom_threshold * limit
    worth_it = tokens > config.min_tokens or limit <= config.min_tokens
    return over_ratio and worth_it


def opening_length(state: TraceState) -> int:
    """Path positions never compressed: leading system messages and the first user message."""
    count = 0
    for seq in state.path:
        role = state.messages[seq].role
        if role == "system":
            count += 1
            continue
        return count + 1 if role == "user" else count
    return count


def kept_tail(state: TraceState, opening: int) -> int:
    """First path position compaction keeps verbatim: the tool group in progress (the last
    assistant message with tool calls and its results, which the model has not seen yet) and,
    before it, the newest client messages the model has not acted on beyond that group. Only
    what precedes it is summarised."""
    path = state.path
    start = len(path)
    while start > opening and state.messages[path[start - 1]].role == "tool":
        start -= 1
    if start < len(path):  # trailing tool results: keep their assistant message too
        if start > opening and state.messages[path[start - 1]].role == "assistant":
            start -= 1
        else:
            start = len(path)  # orphaned results: nothing sensible to keep
    while start > opening:
        message = state.messages[path[start - 1]]
        if message.role != "user" or message.branch_type == "compression":
            break
        start -= 1
    return start


def _note(goal: Goal) -> ChatMessage:
    ended = "done" if goal.status == "done" else "abandoned"
    return {"role": "assistant", "content": goal_note(goal.id, ended, goal.title, goal.summary)}


def fold_completed_goals(
    state: TraceState, history: History
) -> tuple[list[ChatMessage], int] | None:
    """Level 1: the request's messages with each completed goal's assistant messages and
    tool results replaced by one note carrying the goal's summary (where the goal's first
    dropped message was), and an estimate of their tokens; ``None`` when no goal is
    completed. The newest assistant message is always kept with its results, so a tool group
    is never split. The log keeps every raw message."""
    completed = state.goals.completed_ids()
    if not completed:
        return None
    messages = history.messages()
    last = history.last_assistant_index
    kept: list[int] = []
    folded: list[ChatMessage] = []
    noted: set[str] = set()
    extra = 0
    dropping: str | None = None
    for index, seq in enumerate(state.path):
        message = state.messages[seq]
        if message.role == "assistant":
            goal_id = message.goal_id
            dropping = goal_id if goal_id in completed and index != last else None
        elif message.role != "tool":
            dropping = None
        if dropping is None or message.role not in ("assistant", "tool"):
            kept.append(index)
            folded.append(messages[index])
        elif dropping not in noted:
            noted.add(dropping)
            note = _note(state.goals.goals[dropping])
            extra += message_tokens(note)
            folded.append(note)
    if not noted:
        return None
    return folded, history.tokens_at(kept) + extra


class Summarization(Middleware):
    def __init__(self, context_limit: ContextLimit | None = None) -> None:
        self._limit = context_limit

    def limit(self, turn: Turn) -> int:
        if self._limit is not None:
            return self._limit(turn.model.name)
        return context_limit(turn.model.name, turn.env.models)

    async def before_model(self, turn: Turn, request: ModelRequest) -> None:
        state = turn.state
        memo = turn.local(self, _Memo)
        if memo.overhead is None:  # system prompt and tool schemas are fixed for the turn
            tools = json.dumps([spec.to_openai() for spec in request.tools])
            memo.overhead = estimate_tokens(request.system_stable) + estimate_tokens(tools)
        if memo.limit is None or memo.limit[0] != turn.model.name:
            memo.limit = (turn.model.name, self.limit(turn))
        limit = memo.limit[1]
        overhead = memo.overhead
        forced = state.compact_requested
        raw = tokens = turn.history.tokens()
        folded = fold_completed_goals(state, turn.history)
        if folded is not None:
            request.messages, tokens = folded
            turn.saved_tokens["compaction"] = max(raw - tokens, 0)
        if not forced and not should_compress(overhead + tokens, limit, turn.config.compression):
            return
        opening = list(range(opening_length(state)))
        if not forced and should_compress(
            overhead + turn.history.tokens_at(opening), limit, turn.config.compression
        ):
            if not memo.opening_warned:
                memo.opening_warned = True
                log.warning(
                    "trace %s: the opening messages alone fill the context window; "
                    "compaction cannot help",
                    turn.trace_id,
                )
            return
        if await self._summarise(turn):
            folded = fold_completed_goals(state, turn.history)
            request.messages = turn.history.messages() if folded is None else folded[0]
            after = turn.history.tokens() if folded is None else folded[1]
            turn.saved_tokens["compaction"] = max(raw - after, 0)

    async def _summarise(self, turn: Turn) -> bool:
        state = turn.state
        opening = opening_length(state)
        keep = kept_tail(state, opening)
        covered = state.path[opening:keep]
        tail = [state.messages[seq] for seq in state.path[keep:]]
        memo = turn.local(self, _Memo)
        if memo.summariser_failed or all(
            state.messages[seq].branch_type == "compression" for seq in covered
        ):
            return False  # nothing new to summarise (or no summariser this turn)
        if turn.env.experiences is not None and turn.reflect is not None and not memo.reflected:
            memo.reflected = True  # first, what the raw messages taught: experiences
            await turn.reflect()
        if turn.summarise is None:
            return False  # no engine loop: nobody to write the summary
        try:
            text = await turn.summarise(keep)
        except ModelError as exc:
            memo.summariser_failed = True
            log.warning(
                "trace %s: compaction skipped, the summariser failed: %s", turn.trace_id, exc
            )
            await turn.notify(LiveUpdate(kind="status", text=f"compaction skipped: {exc}"))
            return False
        first, last = covered[0], covered[-1]
        batch = turn.batch()
        summary = batch.message(
            "user",
            parent=state.path[opening - 1] if opening else None,
            content=f"[Summary of messages {first}-{last}]\n{text}",
            branch_type="compression",
            synthetic=True,
        )
        for message in tail:  # verbatim, under the summary (usage stays with the original)
            batch.message(
                message.role,
                content=message.content,
                tool_calls=message.tool_calls,
                tool_call_id=message.tool_call_id,
                name=message.name,
                goal_id=message.goal_id,
                synthetic=message.synthetic,
                error_code=message.error_code,
                finish_reason=message.finish_reason,
                provider_fields=message.provider_fields,
                long_term_memory=message.long_term_memory,
                include_output_only_once=message.include_output_only_once,
            )
        batch.add(Compacted(summary_sequence=summary.sequence, range=(first, last), level=2))
        await turn.emit(batch)
        log.info("trace %s: compacted messages %d-%d", turn.trace_id, first, last)
        return True
