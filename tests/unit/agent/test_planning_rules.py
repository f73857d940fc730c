"""The rule-based decomposer in English and Chinese: verbs pick the phases, a comparison
gathers each subject in parallel before comparing."""

from __future__ import annotations

import pytest
from longhaul.agent.planning.routing import rule_estimate, tier_of
from longhaul.agent.planning.rules import compared_subjects, rule_based_plan
from longhaul.agent.planning.schema import parse_phases, phases_to_json
from longhaul.domain.config import RoutingConfig


def shape(goal: str) -> list[tuple[str, list[str]]]:
    return [(p.id, p.depends_on) for p in rule_based_plan(goal)]


GATHER_TWO = [("gather-1", []), ("gather-2", []), ("compare", ["gather-1", "gather-2"])]


@pytest.mark.parametrize(
    ("goal", "subjects", "phases"),
    [
        ("分析飞书和钉钉的竞品对比", ["飞书", "钉钉"], GATHER_TWO),
        ("调研飞书和钉钉的区别", ["飞书", "钉钉"], GATHER_TWO),
        (
            "对比飞书与钉钉，并生成报告",  # noqa: RUF001
            ["飞书", "钉钉"],
            [*GATHER_TWO, ("write", ["compare"])],
        ),
        (
            "比较Python、Go和Rust的性能",
            ["Python", "Go", "Rust"],
            [
                ("gather-1", []),
                ("gather-2", []),
                ("gather-3", []),
                ("compare", ["gather-1", "gather-2", "gather-3"]),
            ],
        ),
        (
            "Compare Feishu and DingTalk and write a report",
            ["Feishu", "DingTalk"],
            [*GATHER_TWO, ("write", ["compare"])],
        ),
        (
            "compare PostgreSQL, MySQL and SQLite for embedded use",
            ["PostgreSQL", "MySQL", "SQLite"],
            [
                ("gather-1", []),
                ("gather-2", []),
                ("gather-3", []),
                ("compare", ["gather-1", "gather-2", "gather-3"]),
            ],
        ),
        ("React vs Vue for a dashboard", ["React", "Vue"], [*GATHER_TWO, ("write", ["compare"])]),
    ],
)
def test_a_comparison_gathers_each_subject_in_parallel_then_compares(
    goal: str, subjects: list[str], phases: list[tuple[str, list[str]]]
) -> None:
    assert compared_subjects(goal) == subjects
    assert shape(goal) == phases
    plan = rule_based_plan(goal)
    for spec, subject in zip(plan, subjects, strict=False):
        assert subject in spec.name and f"Cover only {subject}" in spec.description
        assert spec.preset == "explore"
    assert plan[len(subjects)].preset == "analyst"
    # every rule plan passes the validation a model's plan gets
    parse_phases(phases_to_json(plan), max_phases=10)


@pytest.mark.parametrize(
    ("goal", "ids"),
    [
        ("搜索最新的大模型论文并生成报告", ["search", "write"]),
        ("查找开源向量数据库，分析它们的优缺点", ["search", "analyse"]),  # noqa: RUF001
        ("帮我实现一个登录页面", ["build"]),
        ("修复登录的bug并测试", ["analyse", "build"]),
        ("总结这篇文章", ["write"]),
        ("Research the market for solar panels and write a report", ["search", "write"]),
        ("Fix the login bug and test it", ["analyse", "build"]),
        ("quantum gravity", ["search", "analyse", "write"]),
        ("量子引力", ["search", "analyse", "write"]),
    ],
)
def test_verbs_in_either_language_pick_the_phases_in_order(goal: str, ids: list[str]) -> None:
    plan = rule_based_plan(goal)
    assert [p.id for p in plan] == ids
    assert [p.depends_on for p in plan] == [[], *[[i] for i in ids[:-1]]]
    assert all(goal in p.description for p in plan)


def test_a_chinese_goal_asks_for_answers_in_its_language() -> None:
    assert all("language of the goal" in p.description for p in rule_based_plan("分析市场"))
    assert all("language of the goal" not in p.description for p in rule_based_plan("analyse"))


def test_mentioning_two_things_is_not_a_comparison() -> None:
    assert compared_subjects("Research how A and B work") == []
    assert shape("Research how A and B work") == [("search", [])]


@pytest.mark.parametrize(
    ("goal", "tier"),
    [
        ("What is the capital of France?", "react"),
        ("list my files", "react"),
        ("Research the market for solar panels and write a report", "skill"),
        ("Fix the login bug and test it", "skill"),
        ("分析飞书和钉钉的竞品对比", "team"),
        ("Compare Feishu and DingTalk and write a report", "team"),
        ("Research X, analyse the findings, then build a prototype and write the docs", "team"),
    ],
)
def test_rule_complexity_tiers_the_design_examples(goal: str, tier: str) -> None:
    complexity, reason = rule_estimate(goal)
    assert 0 <= complexity <= 1 and reason
    assert tier_of(complexity, RoutingConfig()) == tier
