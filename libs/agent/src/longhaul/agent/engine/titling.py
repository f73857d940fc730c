"""A display name for a trace created without one, made by the utility model.

The gateway names an unnamed trace after its first message (``trace_created {untitled}``), a
stand-in that is often a long instruction cut at 60 characters. When the first run ends
(completed, failed or stopped: a wait is not an end) once the model has answered something,
the utility model reads the request and the last answer and proposes a few words;
``trace_titled`` records them (or why none came: the stand-in then stays), once per trace.
A ``scripted:`` utility model is not asked: a script answers what it was written to, never a
judgement of its input.
"""

from __future__ import annotations

import asyncio
import logging

from longhaul.agent.contract import TurnOutcome
from longhaul.agent.turn import Turn
from longhaul.domain.events import TraceTitled
from longhaul.domain.messages import content_text
from longhaul.llm.registry import is_scripted
from longhaul.llm.telemetry import traced_complete
from longhaul.llm.types import ModelError, ModelRequest

log = logging.getLogger(__name__)

MAX_TITLE = 60
MAX_SHOWN = 2000
"""Characters of the request and of the answer the utility model reads."""
TIMEOUT_S = 20.0
SYSTEM = (
    "You name conversations for a list of agent runs. Answer with a title of at most six "
    "words that says what the user asked for, in the user's language. No quotes, no "
    "punctuation at the end, nothing else."
)


RUN_ENDS = frozenset({"completed", "failed", "stopped", "max_iterations"})


def wants_title(turn: Turn, outcome: TurnOutcome) -> bool:
    state = turn.state
    return (
        outcome.end in RUN_ENDS
        and state.untitled
        and turn.config.titles
        and not is_scripted(turn.utility_model.name)
        and any(m.role == "assistant" for m in state.main_path())
    )


def clean(text: str) -> str:
    """The first line, without a "Title:" label, quotes or a closing full stop, shortened."""
    line = next((part for part in text.strip().splitlines() if part.strip()), "")
    line = line.strip()
    if line.lower().startswith("title:"):
        line = line[len("title:") :]
    line = " ".join(line.strip().strip("\"'`*“”「」").rstrip(".。").split())
    return line if len(line) <= MAX_TITLE else line[: MAX_TITLE - 1].rstrip() + "…"


async def title(turn: Turn) -> None:
    path = turn.state.main_path()
    asked = next((m for m in path if m.role == "user"), None)
    answered = next((m for m in reversed(path) if m.role == "assistant" and m.content), None)
    shown = f"Request:\n{content_text(asked.content if asked else '')[:MAX_SHOWN]}"
    if answered is not None:
        shown += f"\n\nAnswer:\n{content_text(answered.content)[:MAX_SHOWN]}"
    request = ModelRequest(
        model=turn.utility_model.name,
        messages=[{"role": "user", "content": shown}],
        system_stable=SYSTEM,
        max_tokens=24,
        temperature=0.0,
        metadata={"trace_id": turn.trace_id, "purpose": "title"},
    )
    try:
        response = await asyncio.wait_for(
            traced_complete(turn.utility_model, request), timeout=TIMEOUT_S
        )
        name, error = clean(response.content), None
        if not name:
            error = "the utility model answered no title"
    except (ModelError, TimeoutError) as exc:
        name, error = None, f"utility model failed: {exc or 'timeout'}"
    if error:
        log.info("trace %s keeps its first message as its name: %s", turn.trace_id, error)
    await turn.emit([TraceTitled(name=name or None, error=error)])
