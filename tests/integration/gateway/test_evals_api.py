"""``/api/evals`` on a real gateway and NATS, with two API keys: an eval and its runs are the
creating key's alone; a run's trace carries the eval tag and the task's files from its first
event and is started once however often it is asked for; bad suites are refused naming the
problem; a client cannot forge an eval tag (and so a check) onto a trace of its own."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from longhaul.core.config import NatsConfig
from longhaul.core.store import EventStore

from tests.integration.gateway.harness import (
    RunningGateway,
    gateway_config,
    serve_gateway,
    user_message,
)
from tests.support.folds import trace_state

ALICE, BOB = "alice-evals-key-0123456789", "bob-evals-key-9876543210"
SUITE: dict[str, Any] = {
    "name": "api",
    "defaults": {"max_iterations": 3},
    "tasks": [
        {"id": "one", "prompt": "first", "files": {"notes/seed.txt": "seed"}, "check": "true"},
        {"id": "two", "prompt": "second", "answer": "ok"},
    ],
}
MODEL = "scripted:auto"


@pytest.fixture
async def gateway(nats_config: NatsConfig) -> AsyncIterator[RunningGateway]:
    async with serve_gateway(gateway_config(nats_config, api_keys=f"{ALICE},{BOB}")) as gw:
        yield gw


def _score(trace_id: str, task: str = "one", passed: bool = True) -> dict[str, Any]:
    return {
        "task": task,
        "model": MODEL,
        "repeat": 0,
        "trace_id": trace_id,
        "status": "completed",
        "passed": passed,
        "tokens": 10,
    }


async def test_an_eval_and_its_runs_belong_to_their_key(
    gateway: RunningGateway, store: EventStore
) -> None:
    async with gateway.client(ALICE) as alice, gateway.client(BOB) as bob:
        created = await alice.post("/api/evals", json={"suite": SUITE, "models": [MODEL]})
        assert created.status_code == 201, created.text
        eval_id = created.json()["eval_id"]
        assert created.json()["runs"] == [] and created.json()["tasks"] == 2

        started = await alice.post(
            f"/api/evals/{eval_id}/runs", json={"task": "one", "model": MODEL, "repeat": 0}
        )
        assert started.status_code == 202, started.text
        trace_id = started.json()["trace_id"]
        again = await alice.post(
            f"/api/evals/{eval_id}/runs", json={"task": "one", "model": MODEL, "repeat": 0}
        )
        assert again.json()["trace_id"] == trace_id  # the same run: nothing new started
        state = await trace_state(store, trace_id)
        assert state.eval is not None
        assert (state.eval.eval_id, state.eval.task, state.eval.check) == (eval_id, "one", "true")
        assert [u.name for u in state.uploads_pending] == ["notes/seed.txt"]
        view = (await alice.get(f"/api/traces/{trace_id}")).json()
        assert view["eval"]["eval_id"] == eval_id

        # Bob sees none of it and cannot write into it.
        assert (await bob.get(f"/api/evals/{eval_id}")).status_code == 404
        assert eval_id not in {e["eval_id"] for e in (await bob.get("/api/evals")).json()["evals"]}
        forged = await bob.put(f"/api/evals/{eval_id}/runs", json=_score(trace_id))
        assert forged.status_code == 404
        own = await bob.post("/api/evals", json={"suite": SUITE, "models": [MODEL]})
        stolen = await bob.put(f"/api/evals/{own.json()['eval_id']}/runs", json=_score(trace_id))
        assert stolen.status_code == 404  # Alice's trace is not Bob's to score
        missing = await bob.get(f"/api/evals/{eval_id}/checks/{trace_id}")
        assert missing.status_code == 404

        # A trace scored as another task of the eval is refused; the right one is kept.
        wrong = await alice.put(f"/api/evals/{eval_id}/runs", json=_score(trace_id, task="two"))
        assert wrong.status_code == 422
        recorded = await alice.put(f"/api/evals/{eval_id}/runs", json=_score(trace_id))
        assert recorded.status_code == 200, recorded.text
        stored = (await alice.get(f"/api/evals/{eval_id}")).json()
        assert [r["trace_id"] for r in stored["runs"]] == [trace_id]
        assert stored["summary"][MODEL]["passed"] == 1

        listed = (await alice.get("/api/evals")).json()["evals"]
        assert [e["eval_id"] for e in listed] == [eval_id]

        # Replays and tasks made from runs are the key's own too: Bob can neither replay
        # Alice's eval nor turn her trace into a task, nor name a recording as his model.
        replay = {"suite": SUITE, "replay_of": eval_id}
        assert (await bob.post("/api/evals", json=replay)).status_code == 404
        made = await bob.post("/api/eval-tasks", json={"trace_id": trace_id})
        assert made.status_code == 404
        named = await bob.post(
            "/api/traces", json={"messages": [user_message("hi")], "model": f"replay:{trace_id}"}
        )
        assert named.status_code == 422 and named.json()["error"]["code"] == "invalid_model"
        mine = await alice.post("/api/eval-tasks", json={"trace_id": trace_id, "check": "true"})
        assert mine.status_code == 200, mine.text
        assert mine.json()["task"]["prompt"] == "first"
        assert mine.json()["task"]["files"] == {"notes/seed.txt": "seed"}
        replayed = await alice.post("/api/evals", json=replay)
        assert replayed.status_code == 201, replayed.text
        assert replayed.json()["replay_of"] == eval_id


def _one(task: dict[str, Any]) -> dict[str, Any]:
    return {
        "suite": {"name": "x", "tasks": [{"id": "a", "prompt": "p", **task}]},
        "models": [MODEL],
    }


@pytest.mark.parametrize(
    ("body", "code", "says"),
    [
        ({"suite": {"name": "x", "tasks": []}, "models": [MODEL]}, "invalid_suite", "tasks"),
        (_one({"tols": []}), "invalid_suite", "task a: tols"),
        (_one({"verification": {"check": "nope"}}), "invalid_verification", "nope"),
        ({"suite": SUITE, "models": ["scripted:../../etc/passwd"]}, "invalid_model", ""),
        (_one({"files": {"../x": ""}}), "invalid_suite", "../x"),
        (
            _one({"checks": [{"type": "rubric", "value": "c", "model": "scripted:../../x"}]}),
            "invalid_model",
            "task a: rubric model",
        ),
        (_one({"checks": [{"type": "regex", "value": "("}]}), "invalid_suite", "checks[0]"),
    ],
)
async def test_a_suite_that_cannot_run_is_refused(
    gateway: RunningGateway, body: dict[str, Any], code: str, says: str
) -> None:
    async with gateway.client(ALICE) as alice:
        response = await alice.post("/api/evals", json=body)
        assert response.status_code == 422, response.text
        assert response.json()["error"]["code"] == code
        assert says in response.json()["error"]["message"]
        assert (await alice.get("/api/evals")).json()["evals"] == []


async def test_a_suite_too_large_to_store_is_refused(gateway: RunningGateway) -> None:
    files = {f"f{n}.txt": "x" * 200_000 for n in range(5)}
    async with gateway.client(ALICE) as alice:
        body = _one({"files": files})
        response = await alice.post("/api/evals", json=body)
        assert response.status_code == 413, response.text
        assert response.json()["error"]["code"] == "body_too_large"
        assert "bytes stored" in response.json()["error"]["message"]  # not the body limit
        assert (await alice.get("/api/evals")).json()["evals"] == []


async def test_a_client_cannot_put_an_eval_tag_on_its_own_trace(gateway: RunningGateway) -> None:
    """The attack: a trace created directly with an ``eval`` carrying a ``check``, so that
    the verifier would run a command of the client's choosing. The create body has no such
    field: refused, nothing created."""
    async with gateway.client(ALICE) as alice:
        tag = {"eval_id": "ev_X", "task": "t", "repeat": 0, "check": "cat /etc/shadow"}
        body = {"messages": [user_message("hi")], "model": MODEL, "eval": tag}
        response = await alice.post("/api/traces", json=body)
        assert response.status_code == 422
        assert (await alice.get("/api/traces")).json()["traces"] == []
