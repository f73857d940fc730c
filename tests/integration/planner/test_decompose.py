"""Decomposition: model plans (schema-constrained, validated, self-checked and repaired), the
rule-based fallback, and explicit plans."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from longhaul.agent.planning.rules import rule_based_plan
from longhaul.agent.planning.schema import InvalidPlan, plan_schema
from longhaul.core.connection import Connection
from longhaul.core.store import EventStore, Position
from longhaul.domain import events as ev
from longhaul.domain.ids import new_id
from longhaul.llm.scripted import ScriptedModel
from longhaul.llm.types import ModelError, ModelRequest
from longhaul.planner.decompose import Decomposition, decompose

from tests.integration.planner.conftest import ConfigFactory
from tests.integration.planner.support import (
    StepCompleter,
    create_task,
    max_running,
    planner_service,
    position,
    task_events,
    wait_task,
)
from tests.support.llm_fakes import FakeOpenAI, Reply

PRESETS = ["default", "explore", "analyst"]
TOOLS = ["read", "bash", "webfetch", "workspace_read"]


def good_phase(pid: str, *deps: str) -> dict[str, Any]:
    return {
        "id": pid,
        "name": f"Step {pid}",
        "description": f"carry out step {pid} in full",
        "depends_on": list(deps),
        "preset": "default",
        "tools": ["read"],
        "criteria": [f"{pid} is done"],
    }


class Recorder:
    """A scripted model that answers from a list and keeps every request it got."""

    def __init__(self, *answers: Any) -> None:
        self.answers = list(answers)
        self.requests: list[ModelRequest] = []

    def __call__(self, request: ModelRequest) -> dict[str, Any]:
        self.requests.append(request)
        answer = self.answers[len(self.requests) - 1]
        if isinstance(answer, Exception):
            raise answer
        return {"content": answer if isinstance(answer, str) else json.dumps(answer)}

    def model(self) -> ScriptedModel:
        return ScriptedModel(self, name="scripted:recorder")


async def plan(
    recorder: Recorder | None, goal: str = "ship it", mode: str = "plan", **options: Any
) -> Decomposition:
    return await decompose(
        goal,
        options,
        mode=mode,
        model=recorder.model() if recorder else None,
        max_phases=10,
        presets=PRESETS,
        tools=TOOLS,
    )


async def test_model_plan_is_schema_constrained_and_used() -> None:
    recorder = Recorder({"phases": [good_phase("a"), good_phase("b", "a"), good_phase("c", "a")]})
    result = await plan(recorder)
    assert result.source == "model"
    assert [(p.id, p.depends_on) for p in result.phases] == [("a", []), ("b", ["a"]), ("c", ["a"])]
    assert recorder.requests[0].response_schema == plan_schema(10)
    assert "ship it" in recorder.requests[0].messages[0]["content"]


async def test_quality_issues_go_back_to_the_model_once() -> None:
    lazy = {**good_phase("a"), "criteria": [], "description": "do it"}
    recorder = Recorder({"phases": [lazy]}, {"phases": [good_phase("a")]})
    result = await plan(recorder)
    assert result.source == "model" and result.phases[0].criteria == ["a is done"]
    repair = recorder.requests[1].messages
    assert [m["role"] for m in repair] == ["user", "assistant", "user"]
    assert "acceptance criterion" in repair[-1]["content"]
    assert "describe concretely" in repair[-1]["content"]


@pytest.mark.parametrize(
    "bad",
    [
        {"phases": [good_phase("a", "b"), good_phase("b", "a")]},  # cycle
        {"phases": [good_phase("a", "zzz")]},  # unknown dependency
        {"phases": [good_phase(str(n)) for n in range(11)]},  # more than max_phases
        {"phases": [{**good_phase("a"), "preset": "wizard"}]},  # unknown preset
        {"phases": [{**good_phase("a"), "tools": ["teleport"]}]},  # unknown tool
    ],
)
async def test_plans_that_stay_invalid_fall_back_to_rules(bad: dict[str, Any]) -> None:
    recorder = Recorder(bad, bad, bad, bad)
    result = await plan(recorder, "research the topic")
    assert result.source == "rules"
    assert [p.id for p in result.phases] == ["search"]
    assert result.note


async def test_model_failure_falls_back_to_rules() -> None:
    result = await plan(Recorder(ModelError("503 from provider")), "analyse and write up X")
    assert result.source == "rules" and "503 from provider" in result.note
    assert [p.id for p in result.phases] == ["analyse", "write"]


async def test_offline_model_uses_rules_with_verb_phases() -> None:
    result = await plan(None, "Research the market for solar panels and write a report")
    assert result.source == "rules"
    assert [(p.id, p.depends_on, p.preset) for p in result.phases] == [
        ("search", [], "explore"),
        ("write", ["search"], "default"),
    ]
    assert all("solar panels" in p.description for p in result.phases)


def test_rules_without_known_verbs_use_search_analyse_write() -> None:
    assert [p.id for p in rule_based_plan("quantum gravity")] == ["search", "analyse", "write"]
    assert [p.id for p in rule_based_plan("Fix the login bug and test it")] == ["analyse", "build"]


async def test_explicit_phases_are_validated_and_used() -> None:
    explicit = [good_phase("x"), good_phase("y", "x")]
    result = await plan(Recorder(), phases=explicit)
    assert result.source == "options" and [p.id for p in result.phases] == ["x", "y"]
    with pytest.raises(InvalidPlan, match="unknown"):
        await plan(None, phases=[good_phase("x", "nope")])
    with pytest.raises(InvalidPlan, match="does not match"):
        await plan(None, phases=[good_phase("bad id!")])


async def test_planner_service_plans_with_the_planner_role_model(
    store: EventStore, make_config: ConfigFactory, tmp_path: Path
) -> None:
    script = tmp_path / "plan.yaml"
    script.write_text(
        json.dumps([{"content": json.dumps({"phases": [good_phase("a"), good_phase("b", "a")]})}])
    )
    config = make_config(roles={"planner": f"scripted:{script}"})
    async with planner_service(config):
        task_id = await create_task(store, "build the thing")
        await wait_task(store, task_id, lambda t: t.status == "running")
    created = [e for e in await task_events(store, task_id) if isinstance(e, ev.PlanCreated)]
    assert created[0].source == "model"
    assert [p.id for p in created[0].phases] == ["a", "b"]


async def test_compete_mode_asks_the_model_for_competitors_and_uses_them() -> None:
    race = {
        **good_phase("b", "a"),
        "competitors": [
            {"name": "careful", "preset": "analyst"},
            {"name": "fast", "preset": "default"},
        ],
        "merge": "vote",
    }
    recorder = Recorder({"phases": [good_phase("a"), race]})
    result = await plan(recorder, mode="compete")
    prompt = recorder.requests[0].messages[0]["content"]
    assert "Competitive mode" in prompt and '"competitors", "merge"' in prompt
    assert result.source == "model"
    [_, raced] = result.phases
    assert [c["name"] for c in raced.competitors] == ["careful", "fast"]
    assert raced.merge == "vote"


async def test_plan_mode_does_not_offer_competitors() -> None:
    recorder = Recorder({"phases": [good_phase("a")]})
    await plan(recorder)
    prompt = recorder.requests[0].messages[0]["content"]
    assert "Competitive mode" not in prompt and "competitors" not in prompt


async def test_the_planner_service_plans_in_the_task_mode(
    store: EventStore, make_config: ConfigFactory
) -> None:
    answer = json.dumps({"phases": [good_phase("a")]})
    async with FakeOpenAI(script=[Reply(text=answer)]) as provider:
        config = make_config()
        config.models = provider.models_config().model_copy(
            update={"default": "scripted:auto", "roles": {"planner": "openai:fake-model"}}
        )
        task_id = new_id("task")
        await store.append(
            "task",
            task_id,
            [ev.TaskCreated(goal="write the report", mode="compete")],
            expected=Position(),
            actor="test",
        )
        async with planner_service(config):
            await wait_task(store, task_id, lambda t: t.status == "running")
    [request] = provider.requests
    assert "Competitive mode" in json.dumps(request.json["messages"])


async def test_the_design_example_goal_gathers_both_products_at_once_then_compares(
    conn: Connection, store: EventStore, make_config: ConfigFactory
) -> None:
    """The design's example goal, with the planner model offline: one gather phase per
    product, running side by side, then the comparison built on both."""
    async with StepCompleter(conn, store), planner_service(make_config()):
        task_id = await create_task(store, "分析飞书和钉钉的竞品对比")
        task = await wait_task(store, task_id)
    assert task.status == "completed" and task.plan_source == "rules"
    assert task.order == ["gather-1", "gather-2", "compare"]
    assert [task.phases[p].spec.name for p in task.order[:2]] == ["Gather: 飞书", "Gather: 钉钉"]
    events = await task_events(store, task_id)
    assert max_running(events) == 2
    for gather in ("gather-1", "gather-2"):
        assert position(events, ev.PhaseCompleted, gather) < position(
            events, ev.PhaseStarted, "compare"
        )


async def checked_plan(planner: Recorder, checker: Recorder | None, **kw: Any) -> Decomposition:
    return await decompose(
        "compare two databases and recommend one",
        {},
        model=planner.model(),
        checker=checker.model() if checker else None,
        max_phases=10,
        presets=PRESETS,
        tools=TOOLS,
        **kw,
    )


async def test_the_utility_model_reviews_a_plan_that_passes_the_rules() -> None:
    chained = {"phases": [good_phase("a"), good_phase("b", "a")]}
    parallel = {"phases": [good_phase("a"), good_phase("b"), good_phase("c", "a", "b")]}
    planner = Recorder(chained, parallel)
    checker = Recorder({"ok": False, "problems": ["a and b are independent: run them in parallel"]})
    result = await checked_plan(planner, checker)
    assert result.source == "model" and [p.depends_on for p in result.phases][-1] == ["a", "b"]
    [check] = checker.requests
    assert '"id": "b"' in check.messages[0]["content"] and check.response_schema is not None
    repair = planner.requests[1].messages[-1]["content"]
    assert "reviewer: a and b are independent" in repair
    assert len(planner.requests) == 2  # reviewed once: the repaired plan is not sent again


async def test_an_approving_or_failing_reviewer_keeps_the_plan() -> None:
    plan_a = {"phases": [good_phase("a"), good_phase("b")]}
    approving = Recorder({"ok": True, "problems": []})
    result = await checked_plan(Recorder(plan_a), approving)
    assert result.source == "model" and len(approving.requests) == 1
    failing_checker = Recorder(ModelError("utility down"))
    result = await checked_plan(Recorder(plan_a), failing_checker)
    assert result.source == "model" and [p.id for p in result.phases] == ["a", "b"]


async def test_the_worked_example_is_in_the_prompt_unless_switched_off() -> None:
    shown = Recorder({"phases": [good_phase("a")]})
    await checked_plan(shown, None)
    assert "gather-postgres" in shown.requests[0].messages[0]["content"]
    hidden = Recorder({"phases": [good_phase("a")]})
    await checked_plan(hidden, None, example=False)
    assert "gather-postgres" not in hidden.requests[0].messages[0]["content"]


@pytest.mark.parametrize("check", [True, False])
async def test_the_planner_service_asks_the_utility_model_when_configured(
    store: EventStore, make_config: ConfigFactory, check: bool
) -> None:
    plan_json = json.dumps({"phases": [good_phase("a"), good_phase("b")]})
    verdict = json.dumps({"ok": True, "problems": []})
    async with (
        FakeOpenAI(default=Reply(text=plan_json)) as planner,
        FakeOpenAI(default=Reply(text=verdict)) as utility,
    ):
        config = make_config(plan_model_check=check, plan_worked_example=check)
        planning = planner.models_config("plan")
        checking = utility.models_config("check")
        config.models = planning.model_copy(
            update={
                "default": "scripted:auto",
                "providers": {**planning.providers, **checking.providers},
                "roles": {"planner": "plan:fake-model", "utility": "check:fake-model"},
            }
        )
        async with planner_service(config):
            task_id = await create_task(store, "compare two databases")
            task = await wait_task(store, task_id, lambda t: t.status == "running")
    assert task.plan_source == "model"
    assert len(utility.requests) == (1 if check else 0)
    assert ("gather-postgres" in planner.requests[0].body.decode()) is check
