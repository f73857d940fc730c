"""Goals, collaborators and seeded sub-agents through a running executor and gateway, with
the model on the wire (the OpenAI fake records every request the model gets).

One parent plans a goal (with a reason and criteria), explores with two sub-agents seeded
with one conversation each and a shared context (one finishes, one fails), then has the
goal evaluated by its id. The requests show the children's seeds and context, the parent's
periodic context listing both collaborators with their results, a child's listing its
parent, and the evaluator's task built from the goal tree; GET shows the goal tree with
its ``agent_call`` goals and what each goal cost, summed up the tree.
"""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from longhaul.core.config import NatsConfig
from longhaul.core.store import EventStore
from longhaul.domain.config import ModelPrice, PipelineConfig

from tests.integration.executor.served import gateway_and_executor
from tests.support.folds import trace_state
from tests.support.llm_fakes import Call, Fail, FakeOpenAI, RecordedRequest, Reply
from tests.support.stack import test_config, wait_for_trace

PRICE = ModelPrice(input=1.0, output=2.0)
CALL_COST = (100 * PRICE.input + 20 * PRICE.output) / 1_000_000  # the fake's usage per reply
SEEDS = [
    [{"role": "user", "content": "seed for A"}, {"role": "assistant", "content": "ok A"}],
    [{"role": "user", "content": "seed for B"}, {"role": "assistant", "content": "ok B"}],
]
CONTEXT = "numbers are integers"
PLAN = {"op": "add", "title": "research", "reason": "need facts", "criteria": ["both found"]}


def chat(request: RecordedRequest) -> list[dict[str, Any]]:
    return [m for m in request.json["messages"] if m["role"] != "system"]


def text(message: dict[str, Any]) -> str:
    content = message.get("content")
    return content if isinstance(content, str) else json.dumps(content)


def parent_turn(answered: int) -> Reply:
    """The parent's plan, by how many of its model calls are answered so far."""
    turns = [
        Reply(tool_calls=[Call("goal", PLAN), Call("goal", {"op": "focus", "goal_id": "g1"})]),
        Reply(
            tool_calls=[
                Call(
                    "agent",
                    {
                        "mode": "explore",
                        "tasks": ["find A", "find B"],
                        "messages": SEEDS,
                        "context": CONTEXT,
                    },
                )
            ]
        ),
        Reply(tool_calls=[Call("evaluate", {"target_goal_id": "g1"})]),
        Reply(tool_calls=[Call("goal", {"op": "done", "goal_id": "g1", "summary": "A is 42"})]),
        Reply(text="all done"),
    ]
    return turns[answered]


def scripted() -> Callable[[RecordedRequest], Reply | Fail]:
    """Answers by who asks (the first message); the parent's turns by its request count:
    level-1 compaction folds a done goal's steps, so its history is no counter."""
    parent_calls = itertools.count()
    waiting_parent = iter(
        [
            Reply(tool_calls=[Call("goal", {"op": "add", "title": "hear from the boss"})]),
            Reply(tool_calls=[Call("agent", {"task": "ask the boss"})]),
            Reply(text="noted"),
        ]
    )

    def model(request: RecordedRequest) -> Reply | Fail:
        messages = chat(request)
        first = text(messages[0])
        tools_answered = sum(1 for m in messages if m["role"] == "tool")
        if first == "PARENT":
            return parent_turn(next(parent_calls))
        if first == "WAITING PARENT":
            return next(waiting_parent)
        if first == "ask the boss":
            return Reply(tool_calls=[Call("ask_human", {"question": "which colour?"})])
        if first == "seed for A":  # two looks around, then its finding
            if tools_answered < 2:
                return Reply(tool_calls=[Call("glob", {"pattern": f"*{tools_answered}"})])
            return Reply(text="A is 42")
        if first == "seed for B":
            return Fail(400, "B's model refuses")
        return Reply(text="PASS: both found")  # the evaluator

    return model


@pytest.fixture
async def fake() -> AsyncIterator[FakeOpenAI]:
    async with FakeOpenAI(default=scripted()) as server:
        yield server


async def test_goals_collaborators_and_seeded_sub_agents_on_the_wire(
    fake: FakeOpenAI,
    nats_config: NatsConfig,
    nats_url: str,
    namespace: str,
    store: EventStore,
    tmp_path: Path,
) -> None:
    models = fake.models_config().model_copy(update={"prices": {"fake-model": PRICE}})
    config = test_config(
        nats_url, namespace, models=models, pipeline=PipelineConfig(context_injection_every=2)
    )
    async with gateway_and_executor(
        nats_config, config, tmp_path / "work", "exec-goals"
    ) as gateway:
        async with gateway.client() as http:
            created = await http.post(
                "/api/traces",
                json={
                    "messages": [{"role": "user", "content": "PARENT"}],
                    "model": "openai:fake-model",
                    "name": "the research",
                },
            )
            assert created.status_code == 202, created.text
            trace_id = created.json()["trace_id"]
            state = await wait_for_trace(store, trace_id, within=30)
            view = (await http.get(f"/api/traces/{trace_id}")).json()
    assert state.status == "completed", state.error
    assert not fake.rejected  # the pipeline never sent the API something it refuses

    explore = next(g for g in state.goals.snapshot() if g.mode == "explore")
    child_a, child_b = explore.sub_trace_ids
    requests = [chat(r) for r in fake.requests]

    # item 4: each explore child starts from its own seeded conversation, then its task with
    # the shared context under it
    seeded_a = next(r for r in requests if text(r[0]) == "seed for A")
    assert [m["role"] for m in seeded_a[:3]] == ["user", "assistant", "user"]
    assert seeded_a[1]["content"] == "ok A"
    assert text(seeded_a[2]).startswith("find A") and text(seeded_a[2]).endswith(CONTEXT)
    seeded_b = next(r for r in requests if text(r[0]) == "seed for B")
    assert text(seeded_b[2]).startswith("find B") and CONTEXT in text(seeded_b[2])

    # item 2: the parent's periodic context lists both helpers with what they found
    parent = [r for r in requests if text(r[0]) == "PARENT"]
    [injected] = [
        text(m) for m in parent[2] if text(m).startswith("[Context after 2 steps]")
    ]  # before the parent's third model call
    assert f"- {child_a} [agent, completed]: A is 42" in injected
    assert re.search(rf"- {child_b} \[agent, failed\]: failed: model call failed: .*400", injected)
    assert "a1: explore: 2 sub-agents [explore → " in injected
    # …and a child's lists its parent, read from the parent's log
    child_context = [text(m) for r in requests if text(r[0]) == "seed for A" for m in r]
    assert any(
        re.search(r"- parent \[agent, (running|waiting)\]: the research", m) for m in child_context
    )

    # item 4: evaluate(target_goal_id) judges the goal as the tree describes it
    evaluator = next(r for r in requests if "Evaluate the following" in text(r[0]))
    task = text(evaluator[0])
    assert "Goal g1: research" in task and "Why: need facts" in task and "- both found" in task

    # item 1: the goal tree, over the API, with one agent_call goal per call
    goals = {g["id"]: g for g in view["goal_tree"]["goals"]}
    assert list(goals) == ["root", "g1", "a1", "a2"]
    assert goals["root"]["title"] == "the research" and goals["root"]["reason"]
    assert goals["g1"]["reason"] == "need facts" and goals["g1"]["criteria"] == ["both found"]
    a1, a2 = goals["a1"], goals["a2"]
    assert (a1["type"], a1["mode"], a1["parent_id"]) == ("agent_call", "explore", "g1")
    assert a1["sub_trace_ids"] == [child_a, child_b]
    assert a1["status"] == "abandoned"  # one child failed; both results are in the summary
    assert "A is 42" in a1["summary"] and "failed" in a1["summary"]
    assert (a2["mode"], a2["status"], a2["parent_id"]) == ("evaluate", "done", "g1")
    assert "PASS" in a2["summary"]
    # what each step cost: the parent's calls are filed under the goal in focus (root: the
    # plan and the answer; g1: explore, evaluate, done), children's are on their call's goal
    calls = {gid: g["self_stats"]["model_calls"] for gid, g in goals.items()}
    assert calls == {"root": 2, "g1": 3, "a1": 3, "a2": 1}
    total = {gid: g["cumulative_stats"] for gid, g in goals.items()}
    assert total["g1"]["model_calls"] == 3 + 3 + 1 and total["root"]["model_calls"] == 9
    assert total["root"]["tokens"] == 9 * 120
    assert total["root"]["cost"] == pytest.approx(9 * CALL_COST)
    assert goals["a1"]["cumulative_stats"]["duration_ms"] > 0
    # the children know where they belong: their parent goal is the call's goal
    assert (await trace_state(store, child_a)).parent_goal_id == "a1"
    assert {c["trace_id"] for c in view["collaborators"]} >= {child_a, child_b}


async def test_a_running_sub_agent_and_the_person_it_waits_on_are_in_the_context(
    fake: FakeOpenAI,
    nats_config: NatsConfig,
    nats_url: str,
    namespace: str,
    store: EventStore,
    tmp_path: Path,
) -> None:
    """A parent with an inbox, woken by a message while its sub-agent waits on a person: its
    next request lists the sub-agent still running and the person, read from the child's log."""
    config = test_config(
        nats_url,
        namespace,
        models=fake.models_config(),
        pipeline=PipelineConfig(context_injection_every=2),
    )
    async with gateway_and_executor(nats_config, config, tmp_path / "work", "exec-wake") as gateway:
        async with gateway.client() as http:
            created = await http.post(
                "/api/traces",
                json={
                    "messages": [{"role": "user", "content": "WAITING PARENT"}],
                    "model": "openai:fake-model",
                    "messaging": True,
                    "name": "waiting parent",  # named: no title is asked of the model
                },
            )
            trace_id = created.json()["trace_id"]
            parent = await wait_for_trace(store, trace_id, lambda s: bool(s.subtraces))
            (child,) = parent.subtraces
            await wait_for_trace(store, child, lambda s: s.wait_reason == "human")
            woken = await http.post(
                f"/api/traces/{trace_id}/inbox",
                json={"from": "ops", "content": "how is it going?", "wake": True},
            )
            assert woken.status_code == 202, woken.text
            state = await wait_for_trace(store, trace_id, within=20)
    assert state.status == "completed", state.error
    [woken_request] = [
        r for r in fake.requests if has_text(r, "WAITING PARENT") and has_text(r, "Context after")
    ]
    assert f"- {child} [agent, running]: ask the boss" in woken_request.body.decode()
    assert f"- human [human, asked by {child}]: which colour?" in woken_request.body.decode()


def has_text(request: RecordedRequest, needle: str) -> bool:
    return any(needle in text(m) for m in chat(request))
