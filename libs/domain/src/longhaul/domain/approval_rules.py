"""Risk rules for tool approval, configured once (``pipeline.approval``) instead of per run.

A trace's own ``approval`` list (else its preset's ``approval_tools``) still asks for the tools
it names; the rules decide the other calls by tool and arguments: the first rule whose
``tool`` glob matches the name, whose ``read_only`` (when set) matches the tool's, and whose
``argument`` (when set) occurs in one of the call's string values decides — ``ask`` waits for
a person, ``never`` runs the call. No rule matching: the call runs, as before. Matching is by
substring, never by a regular expression: the arguments are the model's text, and a
backtracking pattern on them could freeze the executor's loop.

Questions and approvals may carry a deadline: after ``deadline_s`` seconds without an answer
the executors' sweeper takes ``on_deadline`` (``deny``, or ``stop`` the run), durably.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterator
from typing import Any, Literal

from longhaul.domain.events import DeadlineAction
from pydantic import BaseModel, ConfigDict, Field

RuleAction = Literal["ask", "never"]


class ApprovalRule(BaseModel):
    model_config = ConfigDict(extra="forbid")

    tool: str = "*"
    """A glob on the tool name (``bash``, ``mcp__*``, ``*``)."""
    argument: str | list[str] | None = None
    """A substring (any of several) one of the call's string values must contain."""
    read_only: bool | None = None
    """Match only tools that change nothing outside the trace (true) or only the others."""
    action: RuleAction = "ask"
    deadline_s: float | None = Field(default=None, gt=0)
    """How long the call waits for a decision (default: ``approval.deadline_s``)."""
    on_deadline: DeadlineAction | None = None

    def matches(self, tool: str, arguments: dict[str, Any], read_only: bool) -> bool:
        if not fnmatch.fnmatchcase(tool, self.tool):
            return False
        if self.read_only is not None and self.read_only != read_only:
            return False
        if self.argument is None:
            return True
        needles = [self.argument] if isinstance(self.argument, str) else self.argument
        return any(n in text for text in _strings(arguments) for n in needles)


class ApprovalConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    rules: list[ApprovalRule] = Field(default_factory=list)
    deadline_s: float | None = Field(default=None, gt=0)
    """Default wait for an approval; ``None``: no deadline."""
    question_deadline_s: float | None = Field(default=None, gt=0)
    """How long an ``ask_human`` question waits; ``None``: no deadline."""
    on_deadline: DeadlineAction = "deny"

    def rule_for(
        self, tool: str, arguments: dict[str, Any], read_only: bool
    ) -> ApprovalRule | None:
        """The first rule matching the call, if any."""
        return next((r for r in self.rules if r.matches(tool, arguments, read_only)), None)

    def approval_deadline(self, rule: ApprovalRule | None) -> tuple[float | None, DeadlineAction]:
        """How long a call waits and what happens then (the rule's, else the defaults)."""
        if rule is None:
            return self.deadline_s, self.on_deadline
        seconds = rule.deadline_s if rule.deadline_s is not None else self.deadline_s
        return seconds, rule.on_deadline or self.on_deadline


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)
