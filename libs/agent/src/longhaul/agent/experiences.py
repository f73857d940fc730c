"""Experiences as the engine sees them: a per-owner book it reads, adds to and credits.

The executor implements :class:`ExperienceBook` over the ``lh_experiences`` KV
(``longhaul.core.experiences.ExperienceStore``); tests use a dict. A trace's owner (its API
key's id) is passed on every call, so a trace only ever reaches its own key's records.

:func:`recall_tags` is the utility model's job of reading ``intent`` and ``state`` tags out of
a new trace's first user message (a JSON answer, validated, one repair round); when the model
gives no usable answer, the message's words that are known tags stand in.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable, Sequence
from typing import Any, Protocol

from longhaul.domain.experiences import Experience, normalise_tags
from longhaul.llm.structured import complete_json
from longhaul.llm.types import Model, ModelError

log = logging.getLogger(__name__)

TAGS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "intent": {"type": "array", "items": {"type": "string"}, "maxItems": 8},
        "state": {"type": "array", "items": {"type": "string"}, "maxItems": 8},
    },
    "required": ["intent", "state"],
    "additionalProperties": False,
}
TAGS_PROMPT = (
    "Classify this task for retrieving lessons from earlier runs. Answer with JSON only: "
    '{{"intent": [...], "state": [...]}} - intent: what the user wants done (e.g. '
    "code_search, web_research, data_cleaning); state: the situation it starts in (e.g. "
    "python_repo, no_network, large_files). Short snake_case tags; reuse these known tags "
    "where they fit:\nintent: {intent}\nstate: {state}\n\nTask:\n{task}"
)
TAG_TIMEOUT_S = 60.0
MAX_KNOWN_TAGS = 200
MAX_TASK_CHARS = 4000


class ExperienceBook(Protocol):
    async def list(self, owner: str | None) -> list[Experience]:
        """Every experience of ``owner``."""
        ...

    async def record(self, owner: str | None, experiences: Iterable[Experience]) -> None:
        """Add (or replace, by id) experiences of ``owner``."""
        ...

    async def credit(self, owner: str | None, ids: Iterable[str], *, helpful: bool) -> None:
        """One more ``helpful`` (else ``harmful``) for each of ``ids`` ``owner`` has."""
        ...


def known_tags(pool: Sequence[Experience]) -> tuple[list[str], list[str]]:
    intent: dict[str, None] = {}
    state: dict[str, None] = {}
    for item in pool:
        intent.update(dict.fromkeys(item.tags.intent))
        state.update(dict.fromkeys(item.tags.state))
    return list(intent)[:MAX_KNOWN_TAGS], list(state)[:MAX_KNOWN_TAGS]


def _words_as_tags(text: str, known: Iterable[str]) -> list[str]:
    words = set(normalise_tags(re.findall(r"[A-Za-z0-9_\-]+", text)))
    return [tag for tag in known if tag in words or tag.replace("_", " ") in text.lower()]


async def recall_tags(
    model: Model, task: str, pool: Sequence[Experience]
) -> tuple[list[str], list[str]]:
    """``(intent, state)`` tags of ``task``, as the utility model reads them."""
    intent, state = known_tags(pool)
    prompt = TAGS_PROMPT.format(
        intent=", ".join(intent) or "-", state=", ".join(state) or "-", task=task[:MAX_TASK_CHARS]
    )
    try:
        value, _ = await complete_json(
            model, [{"role": "user", "content": prompt}], TAGS_SCHEMA, timeout_s=TAG_TIMEOUT_S
        )
    except (ModelError, TimeoutError) as exc:
        log.info("experience tags: utility model gave no answer (%s); using known words", exc)
        return _words_as_tags(task, intent), _words_as_tags(task, state)
    return normalise_tags(value["intent"]), normalise_tags(value["state"])


def describe(items: Sequence[Experience]) -> str:
    """Matches as the ``get_experience`` tool shows them."""
    if not items:
        return "no matching experiences"
    return "\n\n".join(
        f"[{item.id}] ({item.category}; intent: {', '.join(item.tags.intent) or '-'}; "
        f"state: {', '.join(item.tags.state) or '-'}; helpful {item.metrics.helpful}, "
        f"harmful {item.metrics.harmful})\n{item.content}"
        for item in items
    )
