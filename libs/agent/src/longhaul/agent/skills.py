"""The skills index: markdown playbooks an agent can load on demand with the ``skill`` tool.

A skill is ``<dir>/<name>.md`` or ``<dir>/<name>/SKILL.md``, optionally opening with a front
matter block (``---`` / ``name: …`` / ``description: …`` / ``---``). Only names and one-line
descriptions go into the system prompt; the body is read when the model asks for it, which
keeps dozens of skills affordable.

longhaul ships ``planning``, ``research``, ``web`` and ``browser`` (``builtin_skills/``); a
project's own directory (``memory.skills_dir``) comes first, so its skills override those by
name.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

BUILTIN_SKILLS_DIR = Path(__file__).parent / "builtin_skills"


def skill_dirs(project: Path | None = None) -> list[Path]:
    """Where skills are looked up, first match wins: the project's directory, the built-ins."""
    return [*([project] if project is not None else []), BUILTIN_SKILLS_DIR]


@dataclass(frozen=True, slots=True)
class Skill:
    name: str
    description: str
    path: Path

    @property
    def builtin(self) -> bool:
        return self.path.is_relative_to(BUILTIN_SKILLS_DIR)

    def body(self) -> str:
        return _split_front_matter(self.path.read_text(encoding="utf-8"))[1]


def _split_front_matter(text: str) -> tuple[dict[str, str], str]:
    if not text.startswith("---\n"):
        return {}, text
    end = text.find("\n---", 4)
    if end < 0:
        return {}, text
    meta: dict[str, str] = {}
    for line in text[4:end].splitlines():
        key, sep, value = line.partition(":")
        if sep:
            meta[key.strip().lower()] = value.strip().strip("\"'")
    return meta, text[end + 4 :].lstrip("\n")


def _describe(path: Path, fallback_name: str) -> Skill:
    meta, body = _split_front_matter(path.read_text(encoding="utf-8"))
    first_line = next((line.strip("# ").strip() for line in body.splitlines() if line.strip()), "")
    return Skill(
        name=meta.get("name", fallback_name),
        description=meta.get("description", first_line),
        path=path,
    )


class SkillIndex:
    """Skills by name; later directories do not override earlier ones."""

    def __init__(self, skills: Iterable[Skill]) -> None:
        self._skills: dict[str, Skill] = {}
        for skill in skills:
            self._skills.setdefault(skill.name, skill)

    @classmethod
    def load(cls, dirs: Sequence[Path | str]) -> SkillIndex:
        found: list[Skill] = []
        for directory in map(Path, dirs):
            if not directory.is_dir():
                continue
            for entry in sorted(directory.iterdir()):
                if entry.is_file() and entry.suffix == ".md":
                    found.append(_describe(entry, entry.stem))
                elif (entry / "SKILL.md").is_file():
                    found.append(_describe(entry / "SKILL.md", entry.name))
        return cls(found)

    def get(self, name: str) -> Skill | None:
        return self._skills.get(name)

    def names(self) -> list[str]:
        return list(self._skills)

    def all(self) -> list[Skill]:
        return list(self._skills.values())

    def only(self, names: Iterable[str]) -> SkillIndex:
        """The subset a preset or trace asked for; an empty request means all of them."""
        wanted = list(names)
        if not wanted:
            return self
        return SkillIndex(self._skills[name] for name in wanted if name in self._skills)

    def render(self) -> str:
        """The system-prompt listing (empty when there are no skills)."""
        if not self._skills:
            return ""
        lines = [f"- {skill.name}: {skill.description}" for skill in self._skills.values()]
        return "Skills (load one with the `skill` tool before following it):\n" + "\n".join(lines)
