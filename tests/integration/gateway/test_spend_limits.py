"""Spend limits per key through the stack: a keyed gateway with an operator key, executors in
this process and nats-server.

Each scripted model call reports 100 tokens. Key A may spend 250 tokens a UTC day: its run asks
(a ``budget`` wait in its inbox) before the call that would start past the limit, having spent
300 (the limit plus less than one call); it does not fail. A key reads only its own spend,
cannot raise its own limit, and another key cannot touch the run; the operator raises it and
the run finishes. The count lives in ``lh_spend``, not in a process: a second key-A run on a
fresh executor asks before its first call. ``on_limit: ask`` makes a run's own ``max_tokens``
ask the same way, and a stop answers it."""

from __future__ import annotations

import hashlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from longhaul.core.config import NatsConfig
from longhaul.domain.config import SpendLimitsConfig
from longhaul.gateway.auth import owner_id

from tests.integration.cli.harness import longhaul
from tests.integration.executor.scripts import write_script
from tests.integration.gateway.harness import (
    KEY_A,
    KEY_B,
    RunningGateway,
    gateway_config,
    serve_gateway,
    user_message,
)
from tests.integration.gateway.test_approval import wait_status
from tests.support.nats import unique_namespace
from tests.support.stack import InProcessExecutor, eventually, test_config

OPERATOR = "operator-key"
OWNER_A = owner_id(hashlib.sha256(KEY_A.encode()).digest())
OWNER_B = owner_id(hashlib.sha256(KEY_B.encode()).digest())
LIMITS = SpendLimitsConfig.model_validate({"keys": {OWNER_A: {"day": {"tokens": 250}}}})
USAGE = {"prompt_tokens": 90, "completion_tokens": 10}


@pytest.fixture
async def keyed(nats_url: str) -> AsyncIterator[RunningGateway]:
    config = gateway_config(
        NatsConfig(url=nats_url, namespace=unique_namespace()),
        api_keys=f"{KEY_A},{KEY_B}",
        admin_keys=[OPERATOR],
    )
    config.spend_limits = LIMITS
    async with serve_gateway(config, heartbeat_s=0.3) as running:
        yield running


def executor(gateway: RunningGateway, name: str, work: Path) -> InProcessExecutor:
    nats = gateway.runtime.config.nats
    config = test_config(nats.url, nats.namespace, spend_limits=LIMITS)
    return InProcessExecutor(
        nats.url, nats.namespace, name, config=config, settings={"working_root": work}
    )


def steps(tmp_path: Path, name: str, calls: int) -> str:
    """``calls`` turns each calling ``think``, then an answer; every turn reports 100 tokens."""
    turns: list[dict[str, Any]] = [
        {
            "tool_calls": [{"id": f"c{n}", "name": "think", "arguments": {"thought": f"{n}"}}],
            "usage": USAGE,
        }
        for n in range(calls)
    ]
    return write_script(tmp_path / f"{name}.yaml", [*turns, {"content": "done", "usage": USAGE}])


async def start(client: httpx.AsyncClient, model: str, **settings: Any) -> str:
    body = {"messages": [user_message("go")], "model": model, **settings}
    response = await client.post("/api/traces", json=body)
    assert response.status_code == 202, response.text
    return str(response.json()["trace_id"])


async def inbox_item(client: httpx.AsyncClient, trace_id: str) -> dict[str, Any]:
    async def listed() -> dict[str, Any] | None:
        items = (await client.get("/api/inbox")).json()["items"]
        return next((i for i in items if i["trace_id"] == trace_id), None)

    return await eventually(listed, within=30.0)


async def usage(client: httpx.AsyncClient, **params: str) -> dict[str, Any]:
    response = await client.get("/api/usage", params=params)
    assert response.status_code == 200, response.text
    return dict(response.json())


async def test_a_key_at_its_day_limit_asks_and_the_operator_raises_it(
    keyed: RunningGateway, tmp_path: Path
) -> None:
    work = tmp_path / "work"
    first_executor = executor(keyed, "exec-spend-1", work)
    async with (
        first_executor,
        keyed.client(KEY_A) as a,
        keyed.client(KEY_B) as b,
        keyed.client(OPERATOR) as operator,
    ):
        trace = await start(a, steps(tmp_path, "long", 5))
        view = await wait_status(a, trace, "waiting", "completed", "failed", "stopped")
        assert view["status"] == "waiting", view
        item = await inbox_item(a, trace)
        assert item["kind"] == "budget"
        assert "300 tokens spent of 250" in item["question"], item
        assert "day" in item["question"]
        assert (await b.get("/api/inbox")).json()["items"] == []

        mine = await usage(a, group_by="key,model")
        assert mine["total"]["tokens"] == 300  # the limit plus less than one call
        assert mine["total"]["calls"] == 3
        assert {row["key"] for row in mine["rows"]} == {OWNER_A}
        assert (await usage(b))["rows"] == []  # B sees nothing of A's
        everyone = await usage(operator, group_by="key")
        assert [(r["key"], r["tokens"]) for r in everyone["rows"]] == [(OWNER_A, 300)]
        # the cost counters: a script's model is not one the config names, so "other"
        registry = first_executor.executor.metrics.registry
        labels = {"model": "other", "preset": "default", "kind": "prompt"}
        assert registry.get_sample_value("longhaul_model_tokens_total", labels) == 270

        # A may not raise its own limit (spend_limits.keys_answer is off); B cannot even see it
        raise_body = {"action": "raise", "tokens": 1000}
        refused = await a.post(f"/api/traces/{trace}/budget", json=raise_body)
        assert refused.status_code == 403, refused.text
        assert "keys_answer" in refused.json()["error"]["message"]
        hidden = await b.post(f"/api/traces/{trace}/budget", json=raise_body)
        assert hidden.status_code == 404, hidden.text

        # the operator sees every key's runs at a limit; B sees none of A's
        waits = (await operator.get("/api/usage/waits")).json()
        assert [(w["trace_id"], w["key"]) for w in waits["items"]] == [(trace, OWNER_A)]
        assert "300 tokens spent of 250" in waits["items"][0]["detail"]
        assert (await b.get("/api/usage/waits")).json()["items"] == []
        listed_waits = await longhaul("--api-key", OPERATOR, "inbox", "budgets", url=keyed.url)
        assert trace in listed_waits.stdout and OWNER_A in listed_waits.stdout, listed_waits.output

        # the CLI: the table of what A spent, the inbox's answer, the operator's raise
        table = await longhaul("--api-key", KEY_A, "usage", "--by", "key,model", url=keyed.url)
        assert table.code == 0, table.output
        assert OWNER_A in table.stdout and "300" in table.stdout and "total" in table.stdout
        listed = await longhaul("--api-key", KEY_A, "inbox", url=keyed.url)
        assert f"longhaul inbox budget {trace}" in listed.stdout, listed.output
        raised = await longhaul(
            "--api-key", OPERATOR, "inbox", "budget", trace, "--raise-tokens", "1000", url=keyed.url
        )
        assert raised.code == 0 and "raise accepted" in raised.stdout, raised.output
        assert "1,000 tokens" in raised.stdout
        done = await wait_status(a, trace, "completed", "failed", "stopped")
        assert done["status"] == "completed", done
        again = await operator.post(f"/api/traces/{trace}/budget", json=raise_body)
        assert again.status_code == 409, again.text  # not waiting on a budget any more

    async with executor(keyed, "exec-spend-2", work), keyed.client(KEY_A) as a:
        # a fresh executor: the day's spend is read from lh_spend, not remembered
        second = await start(a, steps(tmp_path, "second", 1))
        view = await wait_status(a, second, "waiting", "completed", "failed")
        assert view["status"] == "waiting", view
        assert view["totals"]["prompt_tokens"] == 0  # asked before its first model call


async def test_on_limit_ask_makes_a_runs_own_cap_ask_and_a_stop_answers_it(
    keyed: RunningGateway, tmp_path: Path
) -> None:
    async with (
        executor(keyed, "exec-spend-3", tmp_path / "work"),
        keyed.client(KEY_B) as b,
        keyed.client(OPERATOR) as operator,
    ):
        trace = await start(b, steps(tmp_path, "capped", 5), max_tokens=150, on_limit="ask")
        view = await wait_status(b, trace, "waiting", "completed", "failed", "stopped")
        assert view["status"] == "waiting", view
        item = await inbox_item(b, trace)
        assert item["kind"] == "budget"
        assert "max_tokens is reached: 200 spent of 150" in item["question"], item

        stopped = await operator.post(f"/api/traces/{trace}/budget", json={"action": "stop"})
        assert stopped.status_code == 200, stopped.text
        done = await wait_status(b, trace, "stopped", "completed", "failed")
        assert done["status"] == "stopped", done


async def test_bad_answers_are_refused_with_the_field(keyed: RunningGateway) -> None:
    async with keyed.client(OPERATOR) as operator:
        for body, field in (
            ({"action": "raise", "tokens": -5}, "tokens"),
            ({"action": "raise", "usd": "lots"}, "usd"),
            ({"action": "more"}, "action"),
        ):
            response = await operator.post("/api/traces/t_nothing/budget", json=body)
            assert response.status_code == 422, response.text
            assert field in response.text
        bad = await operator.get("/api/usage", params={"group_by": "key,colour"})
        assert bad.status_code == 422 and "group_by" in bad.text
        since = await operator.get("/api/usage", params={"since": "yesterday"})
        assert since.status_code == 422 and "since" in since.text
