"""Experiences: rules learned from past runs, retrieved by tags and shown to new ones.

The record has the Agent Core design's fields (``id``, ``trace_id``, ``category``, ``tags``
{state, intent}, ``metrics`` {helpful, harmful}, ``content``, ``created_at``). Everything here
is pure — ranking, citation scanning and the markdown file a person reads, edits and carries
between deployments — so the gateway, the executor and the CLI share one definition; the
records themselves live in the ``lh_experiences`` KV bucket (``longhaul.core.experiences``).

The file format: one block per experience, a YAML front matter (``---`` … ``---``) followed by
the content. A content line that is exactly ``---`` (or such a line already escaped with
backslashes) gets one more leading backslash on export and loses it on import, so every bare
``---`` line in the file is a delimiter and the round trip is exact.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from typing import Any

import msgspec
import yaml
from longhaul.domain.ids import ulid

DEFAULT_CATEGORIES = ("tool_usage", "logic_flow", "environment")

ID_PATTERN = r"^ex_[A-Za-z0-9]{1,64}$"
_ID = re.compile(ID_PATTERN)
_CITED = re.compile(r"\bex_[A-Za-z0-9]{1,64}\b")
_DELIMITER = "---"
_ESCAPED = re.compile(r"^\\*---$")
MAX_TAGS = 16
BLANK = " \t\n\r\f\v"
"""What is trimmed off content (ASCII whitespace only: every regex engine agrees on it)."""
NON_BLANK = "[^ \t\n\r\f\v]"
MAX_CONTENT = 8000


class Tags(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    state: list[str] = msgspec.field(default_factory=list)
    intent: list[str] = msgspec.field(default_factory=list)


class Metrics(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    helpful: int = 0
    harmful: int = 0


class Experience(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    id: str
    category: str
    content: str
    created_at: datetime
    trace_id: str | None = None
    tags: Tags = msgspec.field(default_factory=Tags)
    metrics: Metrics = msgspec.field(default_factory=Metrics)

    @property
    def net(self) -> int:
        return self.metrics.helpful - self.metrics.harmful


class ExperienceError(ValueError):
    """An experience (or a file of them) that cannot be accepted; the message says why."""


def new_experience_id() -> str:
    return f"ex_{ulid()}"


def is_experience_id(value: str) -> bool:
    return bool(_ID.match(value))


def normalise_tag(tag: str) -> str:
    """Tags compare case- and spacing-insensitively: ``"Web Search"`` is ``web_search``."""
    return re.sub(r"[\s\-]+", "_", tag.strip().lower())[:64]


def normalise_tags(tags: Iterable[str]) -> list[str]:
    seen: dict[str, None] = {}
    for tag in tags:
        key = normalise_tag(tag)
        if key:
            seen.setdefault(key, None)
    return list(seen)[:MAX_TAGS]


def make(
    *,
    category: str,
    content: str,
    categories: Sequence[str] = DEFAULT_CATEGORIES,
    state: Iterable[str] = (),
    intent: Iterable[str] = (),
    trace_id: str | None = None,
    helpful: int = 0,
    harmful: int = 0,
    id: str | None = None,
    created_at: datetime | None = None,
) -> Experience:
    """A checked, normalised record (fresh id and time unless given)."""
    return checked(
        Experience(
            id=id or new_experience_id(),
            trace_id=trace_id,
            category=category,
            tags=Tags(state=list(state), intent=list(intent)),
            metrics=Metrics(helpful=helpful, harmful=harmful),
            content=content,
            created_at=created_at or datetime.now(UTC),
        ),
        categories,
    )


def checked(experience: Experience, categories: Sequence[str]) -> Experience:
    """``experience`` normalised (tags, stripped content, UTC time), or :class:`ExperienceError`."""
    if not is_experience_id(experience.id):
        raise ExperienceError(f"invalid experience id {experience.id!r} (ex_ + letters/digits)")
    if experience.category not in categories:
        raise ExperienceError(
            f"unknown category {experience.category!r}; known: {', '.join(categories)}"
        )
    content = experience.content.strip(BLANK)
    if not content or len(content) > MAX_CONTENT:
        raise ExperienceError(f"content must have 1 to {MAX_CONTENT} characters")
    if experience.metrics.helpful < 0 or experience.metrics.harmful < 0:
        raise ExperienceError("metrics cannot be negative")
    created = experience.created_at
    created = created.replace(tzinfo=UTC) if created.tzinfo is None else created.astimezone(UTC)
    return msgspec.structs.replace(
        experience,
        content=content,
        created_at=created,
        tags=Tags(
            state=normalise_tags(experience.tags.state),
            intent=normalise_tags(experience.tags.intent),
        ),
    )


def rank(
    experiences: Iterable[Experience],
    *,
    intent: Iterable[str] = (),
    state: Iterable[str] = (),
    limit: int = 3,
) -> list[Experience]:
    """The best ``limit`` matches: more intent tags in common first (intent weighs more than
    state), then more state tags, then ``helpful - harmful``, then the newest. Experiences
    sharing no tag are not matches."""
    wanted_intent, wanted_state = set(normalise_tags(intent)), set(normalise_tags(state))
    scored: list[tuple[tuple[int, int, int, float], Experience]] = []
    for item in experiences:
        by_intent = len(wanted_intent.intersection(item.tags.intent))
        by_state = len(wanted_state.intersection(item.tags.state))
        if by_intent or by_state:
            scored.append(((by_intent, by_state, item.net, item.created_at.timestamp()), item))
    scored.sort(key=lambda pair: pair[0], reverse=True)
    return [item for _, item in scored[:limit]]


def cited_ids(text: str) -> set[str]:
    """Experience ids mentioned in ``text``."""
    return set(_CITED.findall(text))


def reference_block(experiences: Sequence[Experience]) -> str:
    """The text appended to a new trace's first user message."""
    lines = ["## Reference experiences", ""]
    lines.append(
        "Rules learned on earlier runs; cite an id when you rely on one "
        "(citations count toward its helpful/harmful score)."
    )
    for item in experiences:
        lines.append(f"- [{item.id}] ({item.category}) {item.content}")
    return "\n".join(lines)


# -- the markdown file ------------------------------------------------------------------------


def _front_matter(item: Experience) -> dict[str, Any]:
    return {
        "id": item.id,
        "trace_id": item.trace_id,
        "category": item.category,
        "tags": {"state": item.tags.state, "intent": item.tags.intent},
        "metrics": {"helpful": item.metrics.helpful, "harmful": item.metrics.harmful},
        "created_at": item.created_at.isoformat(),
    }


def _escape(line: str) -> str:
    return "\\" + line if _ESCAPED.match(line) else line


def _unescape(line: str) -> str:
    return line[1:] if _ESCAPED.match(line) and line.startswith("\\") else line


def to_markdown(experiences: Iterable[Experience]) -> str:
    blocks = []
    for item in experiences:
        meta = yaml.safe_dump(
            _front_matter(item), sort_keys=False, allow_unicode=True, default_flow_style=None
        )
        body = "\n".join(_escape(line) for line in item.content.split("\n"))
        blocks.append(f"{_DELIMITER}\n{meta}{_DELIMITER}\n{body}\n")
    return "\n".join(blocks)


def from_markdown(text: str, categories: Sequence[str] = DEFAULT_CATEGORIES) -> list[Experience]:
    """Parse an experience file; a block without ``id``, ``created_at`` or ``metrics`` gets a
    fresh id, now, and zero counters. Raises :class:`ExperienceError` naming the block."""
    lines = text.replace("\r\n", "\n").split("\n")
    starts = [number for number, line in enumerate(lines) if line == _DELIMITER]
    if len(starts) % 2:
        raise ExperienceError("unbalanced '---' lines: each block is --- front matter --- content")
    if any(line.strip() for line in lines[: starts[0] if starts else len(lines)]):
        raise ExperienceError("the file must start with a '---' front matter block")
    found: list[Experience] = []
    seen: set[str] = set()
    for index in range(0, len(starts), 2):
        opening, closing = starts[index], starts[index + 1]
        end = starts[index + 2] if index + 2 < len(starts) else len(lines)
        block = index // 2 + 1
        try:
            meta = yaml.safe_load("\n".join(lines[opening + 1 : closing])) or {}
        except yaml.YAMLError as exc:
            raise ExperienceError(f"block {block}: invalid YAML front matter: {exc}") from exc
        if not isinstance(meta, dict):
            raise ExperienceError(f"block {block}: the front matter must be a mapping")
        content = "\n".join(_unescape(line) for line in lines[closing + 1 : end])
        fields = {"id": new_experience_id(), "created_at": datetime.now(UTC), **meta}
        if isinstance(fields["created_at"], str | datetime):
            fields["created_at"] = _timestamp(fields["created_at"], block)
        try:
            item = msgspec.convert({**fields, "content": content}, Experience, strict=False)
            item = checked(item, categories)
        except (msgspec.ValidationError, ExperienceError) as exc:
            raise ExperienceError(f"block {block}: {exc}") from exc
        if item.id in seen:
            raise ExperienceError(f"block {block}: id {item.id} appears twice")
        seen.add(item.id)
        found.append(item)
    return found


def _timestamp(value: str | datetime, block: int) -> datetime:
    if isinstance(value, datetime):
        return value
    try:
        return datetime.fromisoformat(value)
    except ValueError as exc:
        raise ExperienceError(f"block {block}: created_at is not an ISO 8601 time") from exc
