"""``POST /api/runs``: the goal's complexity, from the utility model (a local server speaking
OpenAI's wire format) or from rules when it is offline or fails, routes it to a trace or a
task; the decision is on the created aggregate's first event and in its view."""

from __future__ import annotations

import json
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from typing import Any

import pytest
from longhaul.core.config import LonghaulConfig, NatsConfig
from longhaul.core.store import EventStore
from longhaul.domain import events as ev
from longhaul.domain.config import RoutingConfig
from longhaul.domain.events import Aggregate

from tests.integration.gateway.harness import RunningGateway, gateway_config, serve_gateway
from tests.support.llm_fakes import Fail, FakeOpenAI, Reply

CHINESE_EXAMPLE = "分析飞书和钉钉的竞品对比"
Serve = Callable[..., AbstractAsyncContextManager[RunningGateway]]


@pytest.fixture
def serve(nats_config: NatsConfig) -> Serve:
    def factory(provider: FakeOpenAI | None = None, **routing: Any) -> Any:
        config: LonghaulConfig = gateway_config(nats_config)
        config.pipeline.routing = RoutingConfig(**routing)
        if provider is not None:
            models = provider.models_config()
            config.models = models.model_copy(
                update={"default": "scripted:auto", "roles": {"utility": "openai:fake-model"}}
            )
        return serve_gateway(config)

    return factory


async def first_event(store: EventStore, aggregate: Aggregate, aggregate_id: str) -> ev.Event:
    async for recorded in store.replay(aggregate, aggregate_id):
        return recorded.event
    raise AssertionError(f"{aggregate} {aggregate_id} has no events")


async def post_run(gateway: RunningGateway, **body: Any) -> dict[str, Any]:
    async with gateway.client() as http:
        response = await http.post("/api/runs", json=body)
    assert response.status_code == 202, response.text
    answer: dict[str, Any] = response.json()
    return answer


async def test_offline_rules_send_a_simple_goal_to_one_agent_and_a_comparison_to_a_team(
    serve: Serve, store: EventStore
) -> None:
    async with serve() as gateway:
        simple = await post_run(gateway, goal="What is the capital of France?")
        team = await post_run(gateway, goal=CHINESE_EXAMPLE, review=True)
        async with gateway.client() as http:
            trace_view = (await http.get(f"/api/traces/{simple['trace_id']}")).json()
            task_view = (await http.get(f"/api/tasks/{team['task_id']}")).json()
    assert simple["kind"] == "trace" and simple["task_id"] is None
    assert simple["route"] == {
        "complexity": 0.1,
        "tier": "react",
        "reason": "a single, short request [rules: utility model offline]",
        "source": "rules",
        "mode": "auto",
    }
    created = await first_event(store, "trace", simple["trace_id"])
    assert isinstance(created, ev.TraceCreated) and created.route is not None
    assert created.route.tier == "react" and created.messages[0].content == (
        "What is the capital of France?"
    )
    assert trace_view["route"] == simple["route"]

    assert team["kind"] == "task" and team["trace_id"] is None
    assert team["complexity"] > 0.7 and "飞书, 钉钉" in team["reason"]
    task_created = await first_event(store, "task", team["task_id"])
    assert isinstance(task_created, ev.TaskCreated)
    assert task_created.route is not None and task_created.route.tier == "team"
    assert task_created.review is True and task_created.goal == CHINESE_EXAMPLE
    assert task_view["route"] == team["route"]


@pytest.mark.parametrize(
    ("estimate", "kind", "tier"),
    [(0.92, "task", "team"), (0.5, "trace", "skill"), (0.05, "trace", "react")],
)
async def test_the_utility_model_estimates_the_complexity(
    serve: Serve, store: EventStore, estimate: float, kind: str, tier: str
) -> None:
    answer = json.dumps({"complexity": estimate, "reason": "judged by the model"})
    async with FakeOpenAI(default=Reply(text=answer)) as provider, serve(provider) as gateway:
        run = await post_run(gateway, goal="hello")
    assert run["kind"] == kind and run["route"]["tier"] == tier
    assert run["route"]["source"] == "model" and run["reason"] == "judged by the model"
    [request] = provider.requests
    body = json.loads(request.body)
    assert "hello" in json.dumps(body["messages"]) and "complexity" in json.dumps(body)


async def test_a_failing_utility_model_falls_back_to_rules(serve: Serve) -> None:
    async with (
        FakeOpenAI(default=Fail(400, "bad request")) as provider,
        serve(provider) as gateway,
    ):
        run = await post_run(gateway, goal=CHINESE_EXAMPLE)
    assert run["kind"] == "task" and run["route"]["source"] == "rules"
    assert "utility model failed" in run["reason"]
    assert provider.requests  # it was asked


async def test_the_client_may_choose_the_kind_and_the_thresholds_are_configurable(
    serve: Serve,
) -> None:
    async with serve() as gateway:
        forced_trace = await post_run(gateway, goal=CHINESE_EXAMPLE, mode="trace")
        forced_task = await post_run(gateway, goal="What time is it?", mode="task")
    assert forced_trace["kind"] == "trace" and forced_trace["route"]["tier"] == "team"
    assert forced_trace["reason"].startswith("trace asked for by the client")
    assert forced_task["kind"] == "task" and forced_task["route"]["mode"] == "task"
    async with serve(team_above=0.05, skill_above=0.01) as eager:
        everything = await post_run(eager, goal="What time is it?")
    assert everything["kind"] == "task" and everything["route"]["tier"] == "team"


async def test_model_estimates_can_be_switched_off(serve: Serve) -> None:
    async with FakeOpenAI(default=Reply(text="{}")) as provider:
        async with serve(provider, use_model=False) as gateway:
            run = await post_run(gateway, goal="hello")
    assert run["route"]["source"] == "rules" and provider.requests == []
    assert "switched off" in run["reason"]


async def test_bad_runs_are_refused_and_nothing_is_written(serve: Serve, store: EventStore) -> None:
    async with serve() as gateway, gateway.client() as http:
        for body, code in (
            ({"goal": ""}, 422),
            ({"goal": "x", "mode": "team"}, 422),
            ({"goal": "x", "model": "scripted:../../etc/passwd"}, 422),
            ({"goal": "x", "surprise": 1}, 422),
        ):
            response = await http.post("/api/runs", json=body)
            assert response.status_code == code, (body, response.text)
    info = await store.conn.js.stream_info(store.names.stream)
    assert info.state.messages == 0


async def test_runs_belong_to_the_key_that_made_them(nats_config: NatsConfig) -> None:
    config = gateway_config(nats_config, api_keys="alice-key-0123456789,bob-key-0123456789")
    async with serve_gateway(config) as gateway:
        async with gateway.client("alice-key-0123456789") as alice:
            trace = (await alice.post("/api/runs", json={"goal": "hi"})).json()
            task = (await alice.post("/api/runs", json={"goal": CHINESE_EXAMPLE})).json()
        async with gateway.client("bob-key-0123456789") as bob:
            assert (await bob.get(f"/api/traces/{trace['trace_id']}")).status_code == 404
            assert (await bob.get(f"/api/tasks/{task['task_id']}")).status_code == 404


@pytest.mark.parametrize("default", ["scripted:demo", "scripted:auto"])
async def test_a_scripted_default_model_never_estimates_the_route(
    nats_config: NatsConfig, default: str
) -> None:
    """With no model configured (`make run` uses scripted:demo), the script's placeholder is
    no estimate: the rules route the question to one agent and say why."""
    config: LonghaulConfig = gateway_config(nats_config)
    config.models = config.models.model_copy(update={"default": default, "roles": {}})
    async with serve_gateway(config) as gateway:
        answer = await post_run(gateway, goal="what files are in my workdir?")
    assert answer["kind"] == "trace"
    route = answer["route"]
    assert route["source"] == "rules" and route["tier"] in {"react", "skill"}
    assert route["complexity"] < 0.7 and "[rules:" in route["reason"]
