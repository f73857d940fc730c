"""``GuardrailPolicy``: what ``bash`` may run and how much tool output reaches the model."""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field

from longhaul.domain.config import GuardrailConfig

_AT_COMMAND = r"(?:^|[;&|()\n`]|\$\(|\bsudo|\bexec|\bxargs|\benv)\s*"
"""A program name in command position (not an argument such as ``echo mkfs``)."""

DEFAULT_DENY: tuple[tuple[str, str], ...] = (
    (r"\brm\s+(-[^\s]*\s+)*(/|/\*|~/?|\$HOME/?)(\s|;|&|\||$)", "deleting the root or home"),
    (r"--no-preserve-root", "deleting the root"),
    (_AT_COMMAND + r"mkfs(\.\w+)?(\s|$)", "formatting a filesystem"),
    (r":\s*\(\s*\)\s*\{[^}]*:\s*\|\s*:", "a fork bomb"),
    (
        r"\b(curl|wget|fetch)\b[^|;&]*\|\s*(sudo\s+)?(ba|z|da|k)?sh\b",
        "piping a download into a shell",
    ),
    (r"\bdd\b[^;&|]*\bof=/dev/(sd|hd|nvme|xvd|vd|mmcblk)", "overwriting a disk"),
    (r">\s*/dev/(sd|hd|nvme|xvd|vd|mmcblk)", "overwriting a disk"),
    (_AT_COMMAND + r"(shutdown|reboot|halt|poweroff)(\s|$)", "shutting the machine down"),
    (r"\bchmod\s+(-[^\s]*\s+)*777\s+/(\s|$)", "opening up the root"),
)

_SEPARATORS = re.compile(r"\|\||&&|[;|&\n()]")
_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")


CAP_TAIL = 2_000
"""Characters of an over-long tool output kept from its end by :meth:`GuardrailPolicy.cap`."""


@dataclass(frozen=True)
class GuardrailPolicy:
    """``allow_commands``: allow-list mode — every simple command's program must be listed
    (and command substitution is refused, since it cannot be checked)."""

    deny: tuple[tuple[str, str], ...] = DEFAULT_DENY
    allow_commands: frozenset[str] | None = None
    output_cap: int = 30_000
    _compiled: tuple[tuple[re.Pattern[str], str], ...] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        compiled = tuple((re.compile(pattern), why) for pattern, why in self.deny)
        object.__setattr__(self, "_compiled", compiled)

    @classmethod
    def configured(cls, config: GuardrailConfig) -> GuardrailPolicy:
        """The operator's policy (``pipeline.guardrail``): their deny rules after the
        built-in ones, and their allow-list."""
        allowed = config.allow_commands
        return cls(
            deny=DEFAULT_DENY + tuple((rule.pattern, rule.reason) for rule in config.deny),
            allow_commands=frozenset(allowed) if allowed is not None else None,
        )

    def refusal(self, command: str) -> str | None:
        """Why ``command`` may not run, or ``None``."""
        for pattern, why in self._compiled:
            if pattern.search(command):
                return f"refused by policy: {why}"
        if self.allow_commands is None:
            return None
        if "$(" in command or "`" in command:
            return "refused by policy: command substitution is not allowed in allow-list mode"
        for segment in _SEPARATORS.split(command):
            try:
                words = shlex.split(segment)
            except ValueError:
                return "refused by policy: the command could not be parsed"
            while words and _ASSIGNMENT.match(words[0]):
                words = words[1:]
            if words and words[0] not in self.allow_commands:
                allowed = ", ".join(sorted(self.allow_commands))
                return f"refused by policy: {words[0]!r} is not allowed (allowed: {allowed})"
        return None

    def cap(self, text: str) -> str:
        """At most ``output_cap`` characters: the head and the last ``CAP_TAIL`` characters
        (where a tool's own notices and exit code are) around a notice."""
        if len(text) <= self.output_cap:
            return text
        tail = min(CAP_TAIL, self.output_cap // 4)
        head = self.output_cap - tail
        cut = len(text) - head - tail
        return (
            text[:head]
            + f"\n… {cut} characters of {len(text)} cut by the output cap …\n"
            + text[len(text) - tail :]
        )
