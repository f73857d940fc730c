"""Notifications through the running stack (gateway with its notifier, an executor, a
nats-server, a webhook receiver on loopback that fails the first two attempts of every
delivery): each event reaches each webhook that wants it exactly once per delivery id, signed,
in its format, restricted to its keys; each delivery is visible on its run (and to no other
key) and counted on ``/metrics``; a delivery survives a restart of the notifier between the
event and the delivery (a kill -9 of a gateway subprocess mid-attempt), including an event
that happened while no notifier ran."""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import socket
import time
from collections import Counter
from pathlib import Path
from typing import Any

import httpx
import pytest
from longhaul.client import AsyncClient
from longhaul.core.config import GatewayConfig, LonghaulConfig, NatsConfig
from longhaul.domain import events as ev
from longhaul.domain.notify import WebhookConfig
from longhaul.gateway.schedules.timing import rfc3339
from pydantic import SecretStr

from tests.integration.executor.scripts import write_script
from tests.integration.gateway.harness import RunningGateway, serve_gateway, user_message
from tests.integration.gateway.test_full_stack import follow_until, is_final, waits_for_human
from tests.integration.gateway.test_tasks_api import planner_appends
from tests.support.env import service_env
from tests.support.stack import (
    InProcessExecutor,
    ServiceProcess,
    create_trace,
    eventually,
    wait_for_trace,
)
from tests.support.webhook_receiver import Receiver, webhook_receiver

KEY_A, KEY_B = "key-a-notify-0123456789", "key-b-notify-9876543210"
METRICS_KEY = "metrics-notify-0123456789"
SECRET = "webhook-secret-for-tests"
WITHIN_S = 20.0
START_S = 60.0
"""A gateway subprocess's start-up: its imports alone took 7-11 s on a loaded 2-core box."""


def key_id(key: str) -> str:
    return "k_" + hashlib.sha256(key.encode()).hexdigest()[:16]


def notify_config(nats: NatsConfig, receiver_url: str) -> LonghaulConfig:
    fast = {"retry_base_s": 0.2, "retry_max_s": 1.0, "timeout_s": 2.0}
    return LonghaulConfig(
        nats=nats,
        gateway=GatewayConfig(
            api_keys=f"{KEY_A},{KEY_B}",  # type: ignore[arg-type]
            metrics_keys=METRICS_KEY,  # type: ignore[arg-type]
        ),
        notify=[
            WebhookConfig.model_validate(
                {"name": "ops", "url": f"{receiver_url}/ops", "secret": SECRET, **fast}
            ),
            WebhookConfig.model_validate(
                {
                    "name": "slow",
                    "url": f"{receiver_url}/slow",
                    "events": ["run.failed"],
                    **fast,
                    "timeout_s": 0.3,
                    "max_attempts": 2,
                }
            ),
            WebhookConfig.model_validate(
                {
                    "name": "chat",
                    "url": f"{receiver_url}/chat",
                    "format": "slack",
                    "events": ["run.completed"],
                    "keys": [key_id(KEY_B)],
                    **fast,
                }
            ),
        ],
    )


def signature_holds(request: Any) -> bool:
    """The receiver's side of the scheme, written with the standard library only."""
    timestamp = request.headers["x-longhaul-timestamp"]
    mac = hmac.new(SECRET.encode(), f"{timestamp}.".encode() + request.body, hashlib.sha256)
    fresh = abs(time.time() - int(timestamp)) < 300
    return fresh and hmac.compare_digest(
        "sha256=" + mac.hexdigest(), request.headers["x-longhaul-signature"]
    )


def kinds(receiver: Receiver, path: str) -> Counter[str]:
    return Counter(r.headers["x-longhaul-event"] for r in receiver.delivered(path))


async def test_each_event_reaches_each_webhook_once_per_delivery_id_after_two_failures(
    nats_config: NatsConfig,
    nats_url: str,
    namespace: str,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="httpx")
    with webhook_receiver(fail_first=2) as receiver:
        receiver.hold["/slow"] = 2.0  # beyond its webhook's timeout_s: never delivered
        config = notify_config(nats_config, receiver.url)
        async with (
            serve_gateway(config) as gateway,
            InProcessExecutor(
                nats_url, namespace, "exec-notify", settings={"working_root": tmp_path / "work"}
            ),
            gateway.client(KEY_A) as alice,
            gateway.client(KEY_B) as bob,
        ):
            asks = write_script(
                tmp_path / "asks.yaml",
                [
                    {
                        "tool_calls": [{"name": "ask_human", "arguments": {"question": "ship?"}}],
                        "usage": {"prompt_tokens": 85, "completion_tokens": 5},
                    },
                    {"content": "shipped", "usage": {"prompt_tokens": 4, "completion_tokens": 1}},
                ],
            )
            refused = write_script(
                tmp_path / "refused.yaml", [{"content": "no", "finish_reason": "content_filter"}]
            )
            asking = (
                await alice.post(
                    "/api/traces",
                    json={"messages": [user_message("ship it")], "model": asks, "max_tokens": 100},
                )
            ).json()["trace_id"]
            failing = (
                await alice.post(
                    "/api/traces", json={"messages": [user_message("x")], "model": refused}
                )
            ).json()["trace_id"]
            done = (
                await bob.post(
                    "/api/traces",
                    json={"messages": [user_message("hi")], "model": "scripted:auto"},
                )
            ).json()["trace_id"]
            # a client cannot name a receiver: URLs are the operator's
            smuggled = await alice.post(
                "/api/traces",
                json={
                    "messages": [user_message("x")],
                    "notify": [{"name": "x", "url": f"{receiver.url}/smuggled"}],
                },
            )
            assert smuggled.status_code == 422
            task_id = (
                await alice.post("/api/tasks", json={"goal": "compare a and b", "review": True})
            ).json()["task_id"]
            # what the planner appends for a plan to review (no planner runs here)
            proposal = ev.PlanCreated(phases=[ev.PhaseSpec(id="a", name="gather")], review=True)
            await planner_appends(gateway.runtime.service.store, task_id, proposal)
            await follow_until(alice, asking, waits_for_human)
            # the budget is read from the run while it waits: answer once it was told
            await receiver.until(
                lambda: (
                    kinds(receiver, "/ops")["run.waiting"] == 2
                    and "budget.nearly_spent" in kinds(receiver, "/ops")
                ),
                within=WITHIN_S,
            )
            replied = await alice.post(f"/api/traces/{asking}/reply", json={"content": "yes"})
            assert replied.status_code == 202
            await follow_until(alice, asking, is_final)

            wanted = Counter(
                {"run.waiting": 2, "budget.nearly_spent": 1, "run.completed": 2, "run.failed": 1}
            )
            await receiver.until(
                lambda: kinds(receiver, "/ops") == wanted and bool(kinds(receiver, "/chat")),
                within=WITHIN_S,
            )

            # once per delivery id, after exactly two failures each, signed
            ops = receiver.delivered("/ops")
            assert len({r.delivery_id for r in ops}) == len(ops) == 6
            for request in ops:
                assert [a.answered for a in receiver.attempts(request.delivery_id)] == [
                    500,
                    500,
                    200,
                ]
                assert signature_holds(request)
                body = request.json()
                assert body["delivery_id"] == request.delivery_id
                assert body["kind"] == request.headers["x-longhaul-event"]
            bodies = [r.json() for r in ops]
            by_kind = {(b["kind"], b["aggregate"]): b for b in bodies}
            question = by_kind["run.waiting", "trace"]
            assert question["wait"] == {"kind": "question", "detail": "ship?"}
            assert question["owner"] == key_id(KEY_A) and question["trace_id"] == asking
            review = by_kind["run.waiting", "task"]
            assert review["wait"] == {"kind": "plan_review", "detail": "1 phase(s) proposed"}
            assert (review["task_id"], review["owner"]) == (task_id, key_id(KEY_A))
            assert by_kind["budget.nearly_spent", "trace"]["budget"] == {
                "limit": "max_tokens",
                "used": 90.0,
                "max": 100.0,
                "ratio": 0.9,
            }
            assert by_kind["run.failed", "trace"]["trace_id"] == failing
            completed = {b["trace_id"] for b in bodies if b["kind"] == "run.completed"}
            assert completed == {asking, done}

            # the Slack webhook: only key B's runs, in Slack's shape, unsigned
            (chat,) = receiver.delivered("/chat")
            slack = chat.json()
            assert set(slack) == {"text", "blocks"} and done in slack["text"]
            assert slack["blocks"][0]["type"] == "section"
            assert "x-longhaul-signature" not in chat.headers

            # visible on the run, to its key only (the receiver logs a request before it
            # answers: the gateway records the delivery once the answer is back)
            listed = await settled(alice, f"/api/traces/{asking}/notifications", count=3)
            assert {(i["webhook"], i["kind"], i["status"], i["attempts"]) for i in listed} == {
                ("ops", "run.waiting", "delivered", 3),
                ("ops", "budget.nearly_spent", "delivered", 3),
                ("ops", "run.completed", "delivered", 3),
            }
            assert all(i["last_error"] is None and i["last_status_code"] == 200 for i in listed)
            async with AsyncClient(gateway.url, api_key=KEY_A) as sdk:  # the client's view
                assert (await sdk.notifications(asking))["items"] == listed
            (reviewed,) = await settled(alice, f"/api/tasks/{task_id}/notifications", count=1)
            assert (reviewed["kind"], reviewed["status"]) == ("run.waiting", "delivered")
            assert (await bob.get(f"/api/tasks/{task_id}/notifications")).status_code == 404
            other = await bob.get(f"/api/traces/{asking}/notifications")
            assert other.status_code == 404
            unknown = await bob.get("/api/traces/t_unknown/notifications")
            assert other.json()["error"] == {
                **unknown.json()["error"],
                "message": f"trace {asking} not found",
            }
            for path in ("/api/tasks/k_unknown/notifications", "/api/traces/a.b/notifications"):
                assert (await bob.get(path)).status_code == 404

            # the slow receiver: each attempt cut at its timeout, given up after two, and
            # nothing else waited for it (the deliveries above all came through meanwhile)
            async def given_up() -> dict[str, Any] | None:
                listed = await alice.get(f"/api/traces/{failing}/notifications")
                found = [i for i in listed.json()["items"] if i["webhook"] == "slow"]
                return found[0] if found and found[0]["status"] != "pending" else None

            slow = await eventually(given_up, within=WITHIN_S)
            assert (slow["status"], slow["attempts"], slow["last_error"]) == (
                "failed",
                2,
                "no answer within 0.3s",
            )
            assert {r.path for r in receiver.requests} == {"/ops", "/chat", "/slow"}
            # webhook URLs are credentials: named, never shown, in the logs
            logged = "\n".join(record.getMessage() for record in caplog.records)
            assert "POST [webhook ops]" in logged and receiver.url not in logged
            mine = (await bob.get(f"/api/traces/{done}/notifications")).json()["items"]
            assert {i["webhook"] for i in mine} == {"ops", "chat"}

            metrics = await _metrics(gateway)
            counted = [
                line.split("{")[1]
                for line in metrics.splitlines()
                if line.startswith("longhaul_notifications_total{")
            ]
            assert 'kind="run.completed",outcome="delivered",webhook="ops"} 2.0' in counted
            retried = [line for line in counted if 'outcome="retried"' in line]
            assert len(retried) == 6
            assert [line for line in counted if 'outcome="failed"' in line] == [
                'kind="run.failed",outcome="failed",webhook="slow"} 1.0'
            ]


async def settled(client: httpx.AsyncClient, path: str, *, count: int) -> list[dict[str, Any]]:
    """The notifications listed at ``path`` once there are ``count`` and none is pending."""

    async def probe() -> list[dict[str, Any]] | None:
        items: list[dict[str, Any]] = (await client.get(path)).json()["items"]
        done = len(items) == count and all(i["status"] != "pending" for i in items)
        return items if done else None

    return await eventually(probe, within=WITHIN_S)


async def _metrics(gateway: RunningGateway) -> str:
    async with gateway.client(METRICS_KEY) as scraper:
        response = await scraper.get("/metrics")
    assert response.status_code == 200
    return response.text


def ops_hook(receiver_url: str) -> dict[str, Any]:
    return {"name": "ops", "url": f"{receiver_url}/ops", "retry_base_s": 0.2, "timeout_s": 20}


def gateway_env(nats_url: str, namespace: str, port: int, receiver_url: str) -> dict[str, str]:
    """A keyless gateway subprocess whose notifier tells ``/ops`` of every run ending."""
    env = service_env()
    env.update(
        {
            "LONGHAUL_NATS__URL": nats_url,
            "LONGHAUL_NATS__NAMESPACE": namespace,
            "LONGHAUL_GATEWAY__HOST": "127.0.0.1",
            "LONGHAUL_GATEWAY__PORT": str(port),
            "LONGHAUL_NOTIFY": json.dumps([ops_hook(receiver_url)]),
            "PYTHONUNBUFFERED": "1",
        }
    )
    return env


async def healthy(url: str) -> bool:
    async with httpx.AsyncClient(base_url=url, timeout=1.0) as http:
        try:
            return (await http.get("/healthz")).status_code == 200
        except httpx.HTTPError:
            return False


async def test_a_delivery_survives_a_kill_of_the_notifier_between_event_and_delivery(
    nats_config: NatsConfig, nats_url: str, namespace: str, tmp_path: Path
) -> None:
    """kill -9 of a gateway subprocess while its first attempt waits for the receiver's
    answer, a run ending while no gateway runs, then another gateway (in process, quicker to
    start): both delivered, each once."""
    with webhook_receiver(fail_first=1) as receiver, socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
        probe.close()
        url = f"http://127.0.0.1:{port}"
        env = gateway_env(nats_url, namespace, port, receiver.url)
        receiver.hold["/ops"] = 30.0  # the first attempt hangs: the gateway dies meanwhile
        work = {"working_root": tmp_path / "work"}
        async with InProcessExecutor(
            nats_url, namespace, "exec-notify-kill", settings=work
        ) as executor:
            assert executor.ctx is not None
            store = executor.ctx.store
            gateway = ServiceProcess("longhaul.gateway.main", env, tmp_path / "gateway.log")
            try:
                await gateway.start()
                await eventually(lambda: healthy(url), within=START_S)
                async with httpx.AsyncClient(base_url=url) as http:
                    created = await http.post(
                        "/api/traces",
                        json={"messages": [user_message("a")], "model": "scripted:auto"},
                    )
                before = created.json()["trace_id"]
                await receiver.until(
                    lambda: any(before in r.delivery_id for r in receiver.requests),
                    within=WITHIN_S,
                )
            finally:
                await gateway.kill()
            meanwhile = await create_trace(store, "b", model="scripted:auto")
            await wait_for_trace(store, meanwhile)
            receiver.hold.clear()
            hook = WebhookConfig.model_validate(ops_hook(receiver.url))
            config = LonghaulConfig(nats=nats_config, notify=[hook])
            async with serve_gateway(config) as successor, successor.client() as http:
                await receiver.until(
                    lambda: (
                        {r.json()["trace_id"] for r in receiver.delivered("/ops")}
                        == {before, meanwhile}
                    ),
                    within=WITHIN_S,
                )
                (record,) = await settled(http, f"/api/traces/{before}/notifications", count=1)
        assert record["status"] == "delivered"
        for request in receiver.delivered("/ops"):
            attempts = receiver.attempts(request.delivery_id)
            assert [a.answered for a in attempts] == [500, 200], gateway.log_tail()


OPERATOR = "operator-notify-0123456789"


PAUSE_AFTER = 3


def schedule_config(nats: NatsConfig, receiver_url: str) -> LonghaulConfig:
    """:func:`notify_config`'s keys, capped at one active run, an operator, and its ``ops``
    webhook (every kind) with ``bobs``, which hears only key B's."""
    base = notify_config(nats, receiver_url)
    gateway = base.gateway.model_copy(
        update={
            "admin_keys": [SecretStr(OPERATOR)],
            "max_active_traces_per_key": 1,
            "schedule_pause_after_failures": PAUSE_AFTER,
        }
    )
    bobs = base.notify[0].model_copy(
        update={"name": "bobs", "url": f"{receiver_url}/bobs", "keys": [key_id(KEY_B)]}
    )
    return base.model_copy(update={"gateway": gateway, "notify": [base.notify[0], bobs]})


async def test_a_failing_schedule_is_told_once_then_counted_then_paused_across_two_gateways(
    nats_config: NatsConfig,
) -> None:
    """Two gateways tick a schedule of a key at its active-run cap (a trace no executor runs
    holds it): its first failed tick and the one that pauses it (``PAUSE_AFTER`` in a row) are
    each one ``schedule_failed`` on the schedule's log and one delivery per webhook that wants
    it (after a failure), listed on the schedule for its key only; the ticks between are only
    counted; key B's webhook hears nothing; erasing the key takes the log and the deliveries."""
    with webhook_receiver(fail_first=1) as receiver:
        config = schedule_config(nats_config, receiver.url)
        async with (
            serve_gateway(config) as first,
            serve_gateway(config) as second,
            first.client(KEY_A) as alice,
            second.client(KEY_B) as bob,
            first.client(OPERATOR) as operator,
        ):
            body = {"messages": [user_message("hold")], "model": "scripted:auto"}
            held = (await alice.post("/api/traces", json=body)).json()["trace_id"]

            async def both_see_it_running() -> bool:
                return all(held in g.runtime.mirror.entries for g in (first, second))

            await eventually(both_see_it_running, within=WITHIN_S)
            created = await alice.post(
                "/api/schedules",
                json={
                    "name": "nightly",
                    "every_s": 1,
                    "overlap": "allow",
                    # every tick in turn: with "none" a pass a loaded box delays past the next
                    # tick rightly skips the older one, a gap the test would count
                    "catch_up": "all",
                    "template": {"kind": "trace", "body": body},
                },
            )
            sid = created.json()["schedule_id"]

            async def paused() -> dict[str, Any] | None:
                shown = (await alice.get(f"/api/schedules/{sid}")).json()
                return shown if shown["paused"] else None

            shown = await eventually(paused, within=WITHIN_S + PAUSE_AFTER)
            assert shown["failures"] == PAUSE_AFTER
            assert f"{PAUSE_AFTER} ticks in a row started nothing" in shown["paused_reason"]
            store = first.runtime.service.store

            async def all_told() -> list[ev.Event] | None:
                logged = [recorded.event async for recorded in store.replay("schedule", sid)]
                listed = (await alice.get(f"/api/schedules/{sid}/notifications")).json()
                done = [i for i in listed["items"] if i["status"] == "delivered"]
                told = len(logged) == len(receiver.delivered("/ops")) == len(done)
                return logged if told else None

            logged = await eventually(all_told, within=WITHIN_S)
            failed = [e for e in logged if isinstance(e, ev.ScheduleFailed)]
            ticks = [e.tick_ms for e in failed]
            # PAUSE_AFTER ticks apart at least (a late look may pass some by: catch_up none)
            assert len(ticks) == len(logged) == 2 and (ticks[1] - ticks[0]) % 1000 == 0
            assert ticks[1] - ticks[0] >= 1000 * (PAUSE_AFTER - 1)
            assert [(e.failures, e.paused) for e in failed] == [(1, False), (PAUSE_AFTER, True)]

            ops = receiver.delivered("/ops")
            assert len({r.delivery_id for r in ops}) == len(ops)
            assert sorted(r.json()["tick"] for r in ops) == [rfc3339(t) for t in ticks]
            told_paused = []
            for request in ops:
                assert [a.answered for a in receiver.attempts(request.delivery_id)] == [500, 200]
                assert signature_holds(request)
                told = request.json()
                assert request.headers["x-longhaul-event"] == told["kind"] == "schedule.failed"
                assert told["delivery_id"] == request.delivery_id
                assert (told["aggregate"], told["schedule_id"], told["owner"]) == (
                    "schedule",
                    sid,
                    key_id(KEY_A),
                )
                assert told["name"] == "nightly" and told["status"] in ("failed", "paused")
                told_paused.append(told["status"] == "paused")
                assert told["error"].startswith(
                    f"paused after {PAUSE_AFTER} failed ticks in a row; too_many_active_traces: "
                    if told["status"] == "paused"
                    else "too_many_active_traces: "
                )
            assert sorted(told_paused) == [False, True]
            assert not any(r.path == "/bobs" for r in receiver.requests)
            assert (
                "too_many_active_traces"
                in (await alice.get(f"/api/schedules/{sid}")).json()["last_error"]
            )
            mine = await bob.get(f"/api/schedules/{sid}/notifications")
            assert mine.status_code == 404 and mine.json()["error"]["code"] == "not_found"

            erased = await operator.delete(f"/api/admin/keys/{key_id(KEY_A)}/data")
            assert erased.status_code == 200, erased.text
            assert sid in erased.json()["deleted"]
            assert [r async for r in store.replay("schedule", sid)] == []
            assert await first.runtime.service.notification_records.of_run(sid) == []


async def test_the_runs_of_an_eval_notify_only_when_it_asked(
    nats_config: NatsConfig, nats_url: str, namespace: str, tmp_path: Path
) -> None:
    """An eval's runs send no ``run.completed`` unless the eval was created with
    ``notify: true`` (``longhaul eval --notify``); a plain run beside them still does."""
    suite = {"name": "quiet", "tasks": [{"id": "hi", "prompt": "say hi"}]}
    with webhook_receiver() as receiver:
        async with (
            serve_gateway(notify_config(nats_config, receiver.url)) as gateway,
            InProcessExecutor(
                nats_url, namespace, "exec-evals", settings={"working_root": tmp_path / "work"}
            ),
            gateway.client(KEY_A) as alice,
        ):
            ended: dict[str, str] = {}
            for label, notify in (("quiet", False), ("asked", True)):
                created = await alice.post(
                    "/api/evals",
                    json={"suite": suite, "models": ["scripted:auto"], "notify": notify},
                )
                assert created.status_code == 201, created.text
                eval_id = created.json()["eval_id"]
                started = await alice.post(
                    f"/api/evals/{eval_id}/runs",
                    json={"task": "hi", "model": "scripted:auto", "repeat": 0},
                )
                assert started.status_code == 202, started.text
                ended[label] = started.json()["trace_id"]
                await follow_until(alice, ended[label], is_final)
            plain = (
                await alice.post(
                    "/api/traces",
                    json={"messages": [user_message("hi")], "model": "scripted:auto"},
                )
            ).json()["trace_id"]
            await follow_until(alice, plain, is_final)

            def told() -> set[str]:
                return {r.json()["trace_id"] for r in receiver.delivered("/ops")}

            # events are notified in the log's order: once the last two are told, the first
            # would have been
            await receiver.until(lambda: {ended["asked"], plain} <= told(), within=WITHIN_S)
            assert ended["quiet"] not in told()
