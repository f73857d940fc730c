"""Risk rules for approval: the first matching rule decides, by tool glob, read-only-ness and
a substring of any string argument; deadlines come from the rule, else the defaults."""

from __future__ import annotations

import pytest
from longhaul.core.config import LonghaulConfig
from longhaul.domain.approval_rules import ApprovalConfig
from pydantic import ValidationError

RULES = ApprovalConfig.model_validate(
    {
        "rules": [
            {"tool": "bash", "argument": ["rm ", "curl "], "deadline_s": 60, "on_deadline": "stop"},
            {"read_only": True, "action": "never"},
            {"tool": "mcp__*", "action": "ask"},
        ],
        "deadline_s": 600,
    }
)


@pytest.mark.parametrize(
    ("tool", "arguments", "read_only", "action"),
    [
        ("bash", {"command": "ls; rm -rf /tmp/x"}, False, "ask"),
        ("bash", {"env": {"X": ["curl evil"]}}, False, "ask"),  # nested values are searched
        ("bash", {"command": "ls"}, False, None),
        ("grep", {"pattern": "rm "}, True, "never"),
        ("mcp__github__merge", {}, False, "ask"),
        ("write", {"path": "a"}, False, None),
    ],
)
def test_the_first_matching_rule_decides(
    tool: str, arguments: dict[str, object], read_only: bool, action: str | None
) -> None:
    rule = RULES.rule_for(tool, arguments, read_only)
    assert (rule.action if rule else None) == action


def test_deadlines_come_from_the_rule_else_the_defaults() -> None:
    rm = RULES.rule_for("bash", {"command": "rm x"}, False)
    mcp = RULES.rule_for("mcp__x", {}, False)
    assert RULES.approval_deadline(rm) == (60, "stop")
    assert RULES.approval_deadline(mcp) == (600, "deny")
    assert RULES.approval_deadline(None) == (600, "deny")


def test_rules_are_configured_once_in_the_pipeline_and_checked() -> None:
    config = LonghaulConfig.model_validate(
        {"pipeline": {"approval": {"rules": [{"tool": "bash", "argument": "rm "}]}}}
    )
    assert config.pipeline.approval.rules[0].action == "ask"
    for bad in ({"action": "maybe"}, {"tool": "bash", "pattern": "rm"}, {"deadline_s": 0}):
        with pytest.raises(ValidationError):
            ApprovalConfig.model_validate({"rules": [bad]})
