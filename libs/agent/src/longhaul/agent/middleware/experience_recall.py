"""ExperienceRecall (before_agent + after_agent): what earlier runs learned, shown to new ones.

When a root trace starts (its first run, before its first model call) and its key has
experiences, the utility model reads ``intent`` and ``state`` tags from the first user
message; the best ``memory.top_k`` matches (``longhaul.domain.experiences.rank``: intent over
state, then helpful - harmful) are recorded as ``experiences_recalled``, whose text the fold
appends to that first user message under "Reference experiences" with their ids. The message
is part of the cacheable prefix from then on, so every later step sends it unchanged. Off with
``memory.recall: false``, a preset's ``experiences: false`` or a trace's.

When a turn ends the trace ``completed`` (or ``failed``), every experience id its assistant
messages on the main path cite gets one more ``helpful`` (or ``harmful``) — once per run that
made model calls, so a reflection that re-finishes a trace credits nothing again.
"""

from __future__ import annotations

import logging

from longhaul.agent.contract import TurnOutcome
from longhaul.agent.experiences import recall_tags
from longhaul.agent.middleware.base import Middleware
from longhaul.agent.turn import Turn
from longhaul.domain.events import ExperiencesRecalled
from longhaul.domain.experiences import cited_ids, rank, reference_block
from longhaul.domain.messages import content_text

log = logging.getLogger(__name__)


def wants_recall(turn: Turn) -> bool:
    state, env = turn.state, turn.env
    if env.experiences is None or not env.memory.recall or state.recalled is not None:
        return False
    if state.parent_trace_id is not None or state.runs != 1 or state.run_usage.iterations:
        return False
    return turn.settings.experiences


class ExperienceRecall(Middleware):
    async def before_agent(self, turn: Turn) -> None:
        if not wants_recall(turn):
            return
        first = next((m for m in turn.state.main_path() if m.role == "user"), None)
        if first is None:
            return
        pool = await turn.experience_pool()
        if not pool:
            return
        task = content_text(first.content)
        intent, state = await recall_tags(turn.utility_model, task, pool)
        chosen = rank(pool, intent=intent, state=state, limit=turn.env.memory.top_k)
        await turn.emit(
            [
                ExperiencesRecalled(
                    sequence=first.sequence,
                    intent=intent,
                    state=state,
                    ids=[item.id for item in chosen],
                    text=reference_block(chosen) if chosen else "",
                )
            ]
        )

    async def after_agent(self, turn: Turn, outcome: TurnOutcome) -> None:
        book = turn.env.experiences
        if book is None or outcome.end not in ("completed", "failed"):
            return
        if not turn.state.run_usage.iterations:  # a reflection or compaction re-finished it
            return
        cited: set[str] = set()
        for message in turn.state.main_path():
            if message.role == "assistant" and message.content:
                cited |= cited_ids(content_text(message.content))
        if not cited:
            return
        try:
            await book.credit(turn.state.owner, sorted(cited), helpful=outcome.end == "completed")
        except Exception as exc:  # the trace's end is recorded; the counters are best effort
            log.warning("trace %s: crediting experiences failed: %s", turn.trace_id, exc)
