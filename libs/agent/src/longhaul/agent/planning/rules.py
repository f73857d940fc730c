"""The rule-based plan, used when the planner model is offline or gives no usable plan.

The goal's verbs pick phases from four templates — search, analyse, build, write — kept in
that order and chained, so each phase gets the previous one's result. English verbs are
matched as words; Chinese ones (搜索, 分析, 生成, 报告, 对比 …), which have no spaces around
them, as substrings. A goal with none of the known verbs gets search → analyse → write, the
shape most open-ended tasks have. A comparison ("compare A and B", "A vs B", "对比A和B",
"A和B的竞品对比") gathers each subject in its own phase, in parallel, before one phase
compares them (and a write phase follows when the goal asks for a report).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from longhaul.domain.events import PhaseSpec


@dataclass(frozen=True)
class Template:
    id: str
    name: str
    verbs: frozenset[str]
    preset: str
    instruction: str
    criteria: tuple[str, ...]
    cjk: tuple[str, ...] = ()
    """Chinese verbs, matched as substrings."""


TEMPLATES = (
    Template(
        "search",
        "Search and gather sources",
        frozenset(
            {
                "research",
                "search",
                "find",
                "look",
                "investigate",
                "gather",
                "collect",
                "explore",
                "survey",
                "discover",
                "browse",
                "fetch",
                "scrape",
                "read",
                "learn",
                "identify",
                "list",
            }
        ),
        "explore",
        "Find and collect the information, sources and facts needed for the goal. Record "
        "where each finding comes from.",
        ("lists the relevant findings with their sources",),
        ("搜索", "查找", "查询", "检索", "调研", "研究", "收集", "寻找", "了解", "搜集", "查阅"),
    ),
    Template(
        "analyse",
        "Analyse the findings",
        frozenset(
            {
                "analyse",
                "analyze",
                "analysis",
                "compare",
                "evaluate",
                "assess",
                "review",
                "examine",
                "study",
                "audit",
                "benchmark",
                "measure",
                "diagnose",
                "rank",
                "understand",
                "check",
                "verify",
                "test",
                "debug",
            }
        ),
        "analyst",
        "Analyse what is known so far: compare, weigh the evidence, and draw conclusions "
        "that serve the goal. State assumptions explicitly.",
        ("states conclusions that follow from the evidence", "names open questions"),
        (
            "分析",
            "对比",
            "比较",
            "评估",
            "评测",
            "审查",
            "检查",
            "测试",
            "调试",
            "诊断",
            "排名",
            "验证",
        ),
    ),
    Template(
        "build",
        "Build the solution",
        frozenset(
            {
                "implement",
                "build",
                "code",
                "develop",
                "fix",
                "refactor",
                "program",
                "deploy",
                "migrate",
                "configure",
                "install",
                "automate",
                "port",
                "add",
                "update",
                "optimise",
                "optimize",
                "make",
            }
        ),
        "default",
        "Carry out the changes the goal asks for, check that they work, and report what "
        "was changed and how it was checked.",
        ("the requested change is made and checked",),
        (
            "实现",
            "开发",
            "构建",
            "修复",
            "重构",
            "部署",
            "迁移",
            "配置",
            "安装",
            "优化",
            "编程",
            "搭建",
        ),
    ),
    Template(
        "write",
        "Write the result",
        frozenset(
            {
                "write",
                "draft",
                "report",
                "summarise",
                "summarize",
                "document",
                "compose",
                "create",
                "produce",
                "prepare",
                "present",
                "explain",
                "describe",
                "publish",
                "outline",
                "translate",
                "plan",
            }
        ),
        "default",
        "Write the final deliverable for the goal from the earlier results: complete, "
        "well structured and ready to hand over.",
        ("the deliverable answers the goal completely",),
        (
            "生成",
            "报告",
            "撰写",
            "写一",
            "写作",
            "总结",
            "起草",
            "整理",
            "翻译",
            "文档",
            "输出",
            "编写",
            "汇总",
        ),
    ),
)
DEFAULT_IDS = ("search", "analyse", "write")
MAX_SUBJECTS = 4
_WORD = re.compile(r"[a-z]+")
_CJK = re.compile(r"[\u3400-\u9fff]")
SAME_LANGUAGE = "Write in the language of the goal."

# "compare A and B", "compare A, B and C with D", "A vs B", "A versus B"
_EN_COMPARE = re.compile(
    r"\bcompar(?:e|ing|ison of)\s+(?P<list>.+?)(?=[.;:?!]|\s+(?:and then|then|in terms of|"
    r"regarding|for|in|across|on|by|when|using|and (?:write|produce|report|summari[sz]e|"
    r"prepare|draft|create|present|recommend))\b|$)",
    re.IGNORECASE,
)
_EN_VERSUS = re.compile(
    r"(?P<a>[\w][\w .+#-]*?)\s+(?:vs\.?|versus)\s+(?P<b>[\w][\w.+#-]*(?: [A-Z][\w.+#-]*)*)"
)
_EN_SPLIT = re.compile(r"\s*,\s*(?:and\s+|or\s+)?|\s+(?:and|with|to|or|against)\s+")
# "对比A和B", "比较A与B的…", "A和B的竞品对比", "A与B对比分析"
_ZH_STOPS = ",.;:\uff0c\u3002\uff1b\uff1a\uff01\uff1f"  # and their full-width forms
_ZH_COMPARE_FIRST = re.compile(rf"(?:对比|比较)(?P<list>[^{_ZH_STOPS}]+)")
_ZH_COMPARE_LAST = re.compile(
    rf"(?P<list>[^{_ZH_STOPS}]+?)的?(?:竞品|产品|功能|优劣|性能|价格)?(?:对比|比较|异同|区别|差异)"
)
_ZH_SPLIT = re.compile(r"[和与跟同及、]|以及")
_ZH_LEADING = re.compile(r"^(?:请|帮我|帮忙|我想|我要|分析|研究|调研|搜索|评估|一下|对)+")
_ZH_TRAILING = re.compile(r"(?:的.*|之间.*|两者.*|三者.*|这[两三几]个.*)$")


def rule_based_plan(goal: str) -> list[PhaseSpec]:
    chosen = _templates(goal)
    subjects = compared_subjects(goal)
    if len(subjects) >= 2:
        return _comparison(goal, subjects, write=any(t.id == "write" for t in chosen))
    specs: list[PhaseSpec] = []
    for template in chosen:
        specs.append(_phase(template, goal, depends_on=[specs[-1].id] if specs else []))
    return specs


def _templates(goal: str) -> list[Template]:
    named = set(named_templates(goal))
    return [t for t in TEMPLATES if t.id in (named or DEFAULT_IDS)]


def named_templates(goal: str) -> list[str]:
    """The kinds of work (template ids) the goal's own verbs name; no default."""
    words = set(_WORD.findall(goal.lower()))
    return [t.id for t in TEMPLATES if t.verbs & words or any(verb in goal for verb in t.cjk)]


def _phase(
    template: Template,
    goal: str,
    *,
    depends_on: list[str],
    id: str = "",
    name: str = "",
    focus: str = "",
) -> PhaseSpec:
    language = f" {SAME_LANGUAGE}" if _CJK.search(goal) else ""
    return PhaseSpec(
        id=id or template.id,
        name=name or template.name,
        description=f"{template.instruction}{focus}{language}\n\nGoal: {goal}",
        depends_on=depends_on,
        preset=template.preset,
        criteria=list(template.criteria),
    )


def compared_subjects(goal: str) -> list[str]:
    """The subjects a goal asks to compare (2 to ``MAX_SUBJECTS``), or ``[]``."""
    candidates: list[list[str]] = []
    if _CJK.search(goal):
        for pattern in (_ZH_COMPARE_FIRST, _ZH_COMPARE_LAST):
            candidates += [
                [_zh_subject(part) for part in _ZH_SPLIT.split(hit["list"])]
                for hit in pattern.finditer(goal)
            ]
    listed = _EN_COMPARE.search(goal)
    if listed:
        candidates.append([_en_subject(part) for part in _EN_SPLIT.split(listed["list"])])
    versus = _EN_VERSUS.search(goal)
    if versus:
        candidates.append([_en_subject(versus["a"].split(",")[-1]), _en_subject(versus["b"])])
    for parts in candidates:
        subjects = _unique([part for part in parts if part])
        if len(subjects) >= 2:
            return subjects
    return []


def _zh_subject(text: str) -> str:
    return _ZH_TRAILING.sub("", _ZH_LEADING.sub("", text.strip())).strip()


def _en_subject(text: str) -> str:
    words = text.strip().split()
    while words and words[0].lower() in {"the", "a", "an", "between", "how", "whether"}:
        words.pop(0)
    return " ".join(words).strip(" .,'\"")


def _unique(subjects: list[str]) -> list[str]:
    seen: dict[str, str] = {}
    for subject in subjects:
        seen.setdefault(subject.lower(), subject)
    return list(seen.values())[:MAX_SUBJECTS]


def _comparison(goal: str, subjects: list[str], *, write: bool) -> list[PhaseSpec]:
    search, analyse, _build, writer = TEMPLATES
    gathers = [
        _phase(
            search,
            goal,
            depends_on=[],
            id=f"gather-{n}",
            name=f"Gather: {subject}",
            focus=f" Cover only {subject}; other phases cover the other subjects.",
        )
        for n, subject in enumerate(subjects, 1)
    ]
    compare = _phase(
        analyse,
        goal,
        depends_on=[g.id for g in gathers],
        id="compare",
        name=f"Compare {' / '.join(subjects)}",
        focus=f" Compare {', '.join(subjects)} side by side on the same criteria.",
    )
    specs = [*gathers, compare]
    if write:
        specs.append(_phase(writer, goal, depends_on=["compare"]))
    return specs
