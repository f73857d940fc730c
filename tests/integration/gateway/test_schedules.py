"""Schedules and triggers through two real gateways on one namespace (both tick), no executor:
a run nobody executes stays ``running``, which is exactly what ``overlap: skip`` must see.

Exactly-once per tick across gateways is read from the log: every ``trace_created`` naming
the schedule, one per consecutive tick."""

from __future__ import annotations

import asyncio
import functools
import itertools
import json
import time
from collections.abc import AsyncIterator, Callable
from datetime import datetime
from typing import Any

import httpx
import msgspec
import pytest
from longhaul.core.config import NatsConfig
from longhaul.core.connection import Connection, connect
from longhaul.core.store import EventStore
from longhaul.domain import events as ev
from longhaul.gateway.revocation import Revocation
from longhaul.gateway.routers import schedules as schedules_router
from longhaul.gateway.schedules.signing import signature
from longhaul.gateway.schedules.store import ScheduleStore
from longhaul.gateway.schedules.ticker import Ticker

from tests.integration.gateway.harness import (
    RunningGateway,
    append_as_executor,
    gateway_config,
    serve_gateway,
    user_message,
)
from tests.support.jetstream import created_events
from tests.support.nats import unique_namespace

KEY_A, KEY_B = "sched-key-a-0123456789", "sched-key-b-9876543210"
TRACE = {
    "kind": "trace",
    "body": {"messages": [user_message("nightly report")], "model": "scripted:auto"},
}
DEADLINE_S = 15.0
WEBHOOK_LIMIT = 30
"""Webhook requests per address per minute (a token every 2 s); only the flood test (on the
first gateway; the other webhook test uses the second) comes near it."""


@pytest.fixture(scope="module")
async def gateways(nats_url: str) -> AsyncIterator[tuple[RunningGateway, RunningGateway]]:
    config = gateway_config(
        NatsConfig(url=nats_url, namespace=unique_namespace()),
        api_keys=f"{KEY_A},{KEY_B}",
        webhook_rate_limit_per_minute=WEBHOOK_LIMIT,
    )
    async with serve_gateway(config) as first, serve_gateway(config) as second:
        yield first, second


@pytest.fixture(scope="module")
async def alice(
    gateways: tuple[RunningGateway, RunningGateway],
) -> AsyncIterator[httpx.AsyncClient]:
    async with gateways[0].client(KEY_A) as client:
        yield client


@pytest.fixture(scope="module")
async def bob(gateways: tuple[RunningGateway, RunningGateway]) -> AsyncIterator[httpx.AsyncClient]:
    async with gateways[1].client(KEY_B) as client:
        yield client


@pytest.fixture(scope="module")
async def store(gateways: tuple[RunningGateway, RunningGateway]) -> AsyncIterator[EventStore]:
    conn: Connection = await connect(gateways[0].runtime.config.nats)
    try:
        yield EventStore(conn)
    finally:
        await conn.close()


async def until(check: Callable[[], Any], what: str, deadline_s: float = DEADLINE_S) -> Any:
    """Poll an HTTP-visible condition (the only way a client can observe it) until true."""
    deadline = time.monotonic() + deadline_s
    while not (value := await check()):
        assert time.monotonic() < deadline, f"never: {what}"
        await asyncio.sleep(0.1)
    return value


async def runs(client: httpx.AsyncClient, schedule_id: str) -> list[dict[str, Any]]:
    answer = await client.get(f"/api/schedules/{schedule_id}/runs")
    assert answer.status_code == 200, answer.text
    return list(answer.json()["runs"])


async def created_on_log(store: EventStore, field: str, value: str) -> list[str]:
    """The ids of every trace whose ``trace_created`` names ``value`` in ``field``."""
    events = await created_events(store.conn, "trace")
    return [e.aggregate_id for e in events if getattr(e, field, None) == value]


async def test_a_schedule_is_checked_kept_per_key_and_run_now(
    alice: httpx.AsyncClient, bob: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    refused = [
        {"name": "x", "template": TRACE},  # no timing
        {"name": "x", "every_s": 5, "cron": "* * * * *", "template": TRACE},
        {"name": "x", "cron": "* * * *", "template": TRACE},
        {"name": "x", "cron": "61 * * * *", "template": TRACE},
        {"name": "x", "cron": "0 9 * * *", "timezone": "Mars/Olympus", "template": TRACE},
        {"name": "x", "at": "2020-01-01T00:00:00Z", "template": TRACE},
        {"name": "x", "at": "tomorrow", "template": TRACE},
        {"name": "x", "every_s": 0.5, "template": TRACE},
        {"name": "x", "every_s": 5, "template": {"kind": "trace", "body": {"messages": []}}},
        {
            "name": "x",
            "every_s": 5,
            "template": {
                "kind": "trace",
                "body": {"messages": [user_message("x")], "model": "nope:x"},
            },
        },
        {"name": "x", "every_s": 5, "template": {"kind": "task", "body": {"goal": ""}}},
        {"name": "x", "every_s": 5, "template": TRACE, "overlap": "sometimes"},
    ]
    for body in refused:
        answer = await alice.post("/api/schedules", json=body)
        assert answer.status_code == 422, (body, answer.text)
    assert (await alice.get("/api/schedules")).json()["schedules"] == []

    created = await alice.post(
        "/api/schedules",
        json={
            "name": "daily",
            "cron": "0 9 * * 1-5",
            "timezone": "Europe/Paris",
            "template": TRACE,
        },
    )
    assert created.status_code == 201, created.text
    schedule = created.json()
    sid = schedule["schedule_id"]
    monkeypatch.setattr(schedules_router, "MAX_PER_KEY", 1)
    more = {"name": "one too many", "every_s": 60, "template": TRACE}
    assert (await alice.post("/api/schedules", json=more)).status_code == 409
    bobs = await bob.post("/api/schedules", json=more)
    assert bobs.status_code == 201  # the cap is per key
    monkeypatch.undo()
    assert schedule["overlap"] == "skip" and schedule["catch_up"] == "none"
    assert schedule["next_run_at"].endswith(("T07:00:00.000Z", "T08:00:00.000Z"))  # 09:00 Paris

    paused = await alice.patch(f"/api/schedules/{sid}", json={"paused": True, "name": "weekday"})
    assert paused.json()["paused"] is True and paused.json()["name"] == "weekday"
    retimed = await alice.patch(f"/api/schedules/{sid}", json={"cron": None, "every_s": 3600})
    assert retimed.status_code == 200 and retimed.json()["every_s"] == 3600
    assert retimed.json()["cron"] is None
    assert (await alice.patch(f"/api/schedules/{sid}", json={"every_s": 0})).status_code == 422

    # another key: every route answers as for an id that does not exist, and changes nothing
    for method, path in (
        ("GET", f"/api/schedules/{sid}"),
        ("PATCH", f"/api/schedules/{sid}"),
        ("DELETE", f"/api/schedules/{sid}"),
        ("POST", f"/api/schedules/{sid}/run"),
        ("GET", f"/api/schedules/{sid}/runs"),
    ):
        body = {"paused": False} if method == "PATCH" else None
        answer = await bob.request(method, path, json=body)
        assert answer.status_code == 404, (method, path, answer.text)
        assert answer.json()["error"]["code"] == "not_found"
    assert [s["name"] for s in (await bob.get("/api/schedules")).json()["schedules"]] == [
        "one too many"
    ]
    await bob.delete(f"/api/schedules/{bobs.json()['schedule_id']}")
    assert (await alice.get(f"/api/schedules/{sid}")).json()["paused"] is True

    # run now (a paused schedule too); a repeat with the same key starts nothing
    headers = {"Idempotency-Key": "now-1"}
    first = await alice.post(f"/api/schedules/{sid}/run", headers=headers)
    again = await alice.post(f"/api/schedules/{sid}/run", headers=headers)
    assert first.status_code == again.status_code == 202
    assert first.json()["new"] is True and again.json()["new"] is False
    run_id = first.json()["trace_id"]
    assert again.json()["trace_id"] == run_id
    trace = (await alice.get(f"/api/traces/{run_id}")).json()
    assert trace["schedule_id"] == sid
    listed = await runs(alice, sid)
    assert [(r["run_id"], r["manual"]) for r in listed] == [(run_id, True)]
    assert (await bob.get(f"/api/traces/{run_id}")).status_code == 404

    assert (await alice.delete(f"/api/schedules/{sid}")).json()["deleted"] is True
    assert (await alice.get(f"/api/schedules/{sid}")).status_code == 404

    # a task template starts a task, which names its schedule too
    task = {"kind": "task", "body": {"goal": "compare A and B", "review": True}}
    weekly = await alice.post(
        "/api/schedules", json={"name": "weekly", "cron": "0 6 * * 1", "template": task}
    )
    assert weekly.status_code == 201, weekly.text
    started = (await alice.post(f"/api/schedules/{weekly.json()['schedule_id']}/run")).json()
    assert started["kind"] == "task" and started["task_id"].startswith("task_s")
    shown = (await alice.get(f"/api/tasks/{started['task_id']}")).json()
    assert shown["schedule_id"] == weekly.json()["schedule_id"]
    await alice.delete(f"/api/schedules/{weekly.json()['schedule_id']}")


async def test_each_tick_starts_one_run_across_two_gateways(
    alice: httpx.AsyncClient, store: EventStore
) -> None:
    # catch_up "all": a pass a loaded box delays past the next tick starts both ticks in
    # turn (with "none" it would rightly skip the older one and leave a gap below).
    body = {
        "name": "every second",
        "every_s": 1,
        "overlap": "allow",
        "catch_up": "all",
        "template": TRACE,
    }
    created = await alice.post("/api/schedules", json=body)
    assert created.status_code == 201, created.text
    sid = created.json()["schedule_id"]
    await until(lambda: _at_least(alice, sid, 3), "three ticks")
    await alice.patch(f"/api/schedules/{sid}", json={"paused": True})

    async def listed_as_on_log() -> list[dict[str, Any]] | None:
        """The runs once every run on the log is listed: a pass that was starting a tick
        when the pause landed records its run just after."""
        listed = await runs(alice, sid)
        on_log = await created_on_log(store, "schedule_id", sid)
        return listed if sorted(on_log) == sorted(r["run_id"] for r in listed) else None

    listed = await until(listed_as_on_log, "every run on the log listed")
    ticks = sorted(r["tick"] for r in listed)
    assert len(set(ticks)) == len(ticks)
    stamps = [_epoch(t) for t in ticks]
    assert all(round(b - a, 3) == 1.0 for a, b in itertools.pairwise(stamps)), ticks


async def _at_least(client: httpx.AsyncClient, sid: str, count: int) -> bool:
    return len(await runs(client, sid)) >= count


def _epoch(text: str) -> float:
    return datetime.fromisoformat(text).timestamp()


async def test_overlap_skip_passes_ticks_by_and_queue_waits_while_a_run_is_going(
    alice: httpx.AsyncClient, store: EventStore
) -> None:
    sids = {}
    for overlap in ("skip", "queue"):
        body = {"name": overlap, "every_s": 1, "overlap": overlap, "template": TRACE}
        if overlap == "queue":
            # "all": the run that ends the wait is the tick that waited, however late the pass
            # (with "none", like "latest", a pass past the next tick rightly starts that one)
            body["catch_up"] = "all"
        sids[overlap] = (await alice.post("/api/schedules", json=body)).json()["schedule_id"]
    firsts = {
        o: (await until(functools.partial(runs, alice, sid), "a first run"))[0]
        for o, sid in sids.items()
    }

    async def passed_by() -> bool:
        shown = {o: (await alice.get(f"/api/schedules/{sid}")).json() for o, sid in sids.items()}
        queued = shown["queue"]["next_run_at"]
        return shown["skip"]["skipped"] >= 1 and _epoch(queued) < time.time() - 1

    await until(passed_by, "a tick skipped, and one waiting in the queue")
    for overlap, sid in sids.items():  # the first runs are still going: nothing else started
        assert len(await runs(alice, sid)) == 1, overlap
    waiting = (await alice.get(f"/api/schedules/{sids['queue']}")).json()
    assert waiting["skipped"] == 0
    for first in firsts.values():
        await append_as_executor(store, first["run_id"], ev.Stopped(reason="test"))
    for overlap, sid in sids.items():
        await until(
            functools.partial(_at_least, alice, sid, 2), f"{overlap}: a run once the first ended"
        )
    queued = (await runs(alice, sids["queue"]))[0]
    assert _epoch(queued["tick"]) == _epoch(waiting["next_run_at"])  # the tick that waited
    for sid in sids.values():
        await alice.delete(f"/api/schedules/{sid}")


async def test_a_run_started_as_a_pause_lands_is_still_listed(
    gateways: tuple[RunningGateway, RunningGateway],
    alice: httpx.AsyncClient,
    store: EventStore,
) -> None:
    """A ticker pass that read the schedule before a pause starts its tick's run, then finds
    the record changed: the run is on the log, so it is recorded on the paused schedule too
    (nobody looks at a paused schedule again to do it later)."""
    body = {"name": "racing a pause", "every_s": 3600, "paused": True, "template": TRACE}
    created = await alice.post("/api/schedules", json=body)
    assert created.status_code == 201, created.text
    sid = created.json()["schedule_id"]
    schedules = ScheduleStore(store.conn)
    [(record, revision)] = [(r, rev) for r, rev in await schedules.every() if r.schedule_id == sid]
    # What a pass read before the pause: the schedule running, a tick due (an hour back).
    read = msgspec.structs.replace(
        record,
        paused=False,
        anchor_ms=record.anchor_ms - 3_600_000,
        next_tick_ms=record.anchor_ms,
    )
    paused = await alice.patch(f"/api/schedules/{sid}", json={"paused": True})  # lands first
    assert paused.status_code == 200, paused.text

    assert (
        await Ticker(gateways[0].runtime, schedules, Revocation(gateways[0].runtime)).handle(
            read, revision
        )
        is None
    )  # stale
    [run] = await runs(alice, sid)
    assert await created_on_log(store, "schedule_id", sid) == [run["run_id"]]
    shown = (await alice.get(f"/api/schedules/{sid}")).json()
    assert shown["paused"] is True and shown["next_run_at"] == created.json()["next_run_at"]
    await alice.delete(f"/api/schedules/{sid}")


def signed(
    secret: str, body: bytes, *, at: float | None = None, key: str | None = None
) -> dict[str, str]:
    timestamp = str(int(at if at is not None else time.time()))
    return {
        "X-Longhaul-Timestamp": timestamp,
        "X-Longhaul-Signature": signature(secret, timestamp, body, key),
        "Content-Type": "application/json",
        **({"Idempotency-Key": key} if key else {}),
    }


async def test_a_signed_trigger_starts_one_run_and_a_replay_none(
    gateways: tuple[RunningGateway, RunningGateway],
    alice: httpx.AsyncClient,
    bob: httpx.AsyncClient,
    store: EventStore,
) -> None:
    template = {
        "kind": "trace",
        "body": {
            "messages": [user_message("triage {{payload.issue.title}} by {{payload.user}}")],
            "model": "scripted:auto",
        },
    }
    created = await alice.post("/api/triggers", json={"name": "deploy", "template": template})
    assert created.status_code == 201, created.text
    trigger = created.json()
    tid, secret, url = trigger["trigger_id"], trigger["secret"], trigger["url"]
    assert (
        await alice.post("/api/triggers", json={"name": "deploy", "template": template})
    ).status_code == 409
    # names are per key: bob's "deploy" is his own, and neither sees the other's
    bobs = await bob.post("/api/triggers", json={"name": "deploy", "template": template})
    assert bobs.status_code == 201 and bobs.json()["trigger_id"] != tid
    assert (await bob.get(f"/api/triggers/{tid}")).status_code == 404
    assert (await bob.delete(f"/api/triggers/{tid}")).status_code == 404
    assert "secret" not in (await alice.get(f"/api/triggers/{tid}")).json()
    assert [t["trigger_id"] for t in (await alice.get("/api/triggers")).json()["triggers"]] == [tid]

    async with gateways[1].client() as anyone:  # the webhook carries no API key
        body = b'{"issue": {"title": "disk full"}, "user": "ops"}'
        headers = signed(secret, body)
        first = await anyone.post(url, content=body, headers=headers)
        assert first.status_code == 202, first.text
        run_id = first.json()["trace_id"]
        assert first.json()["new"] is True
        replay = await anyone.post(url, content=body, headers=headers)
        assert replay.status_code == 202 and replay.json() == {**first.json(), "new": False}

        one = await anyone.post(url, content=body, headers=signed(secret, body, key="delivery-7"))
        two = await anyone.post(
            url, content=body, headers=signed(secret, body, at=time.time() - 5, key="delivery-7")
        )
        assert one.status_code == 202, one.text
        one_id = one.json()["trace_id"]
        assert one_id == two.json()["trace_id"] != run_id
        assert two.json()["new"] is False
        # the spec's plain signature with an (unsigned) Idempotency-Key: the key names the run
        plain = {**signed(secret, body, at=time.time() - 20), "Idempotency-Key": "plain-1"}
        three = await anyone.post(url, content=body, headers=plain)
        resent = {**signed(secret, body, at=time.time() - 25), "Idempotency-Key": "plain-1"}
        four = await anyone.post(url, content=body, headers=resent)
        assert three.json()["trace_id"] == four.json()["trace_id"] not in (run_id, one_id)
        assert three.json()["new"] is True and four.json()["new"] is False
        # a captured request replayed under Idempotency-Keys of the replayer's choosing: a
        # plain signature already claimed its run, so each answers that one and starts nothing
        for stolen, original in (
            ({**headers, "Idempotency-Key": "evil-1"}, first),
            ({**headers, "Idempotency-Key": "delivery-7"}, first),
            ({**plain, "Idempotency-Key": "evil-2"}, three),
        ):
            again = await anyone.post(url, content=body, headers=stolen)
            assert again.status_code == 202, again.text
            assert again.json() == {**original.json(), "new": False}
        # a signature over another key does not pass for this one
        keyed = {**signed(secret, body, key="delivery-7"), "Idempotency-Key": "evil-3"}
        forged = await anyone.post(url, content=body, headers=keyed)
        assert forged.status_code == 401 and forged.json()["error"]["code"] == "invalid_signature"

        refusals = [
            (
                401,
                "invalid_signature",
                body,
                {**headers, "X-Longhaul-Signature": "sha256=" + "0" * 64},
            ),
            (401, "invalid_signature", body + b" ", headers),
            (401, "invalid_signature", body, {"Content-Type": "application/json"}),
            (401, "stale_timestamp", body, signed(secret, body, at=time.time() - 600)),
            (401, "invalid_signature", body, signed("whsec_wrong", body)),
            (404, "not_found", body, headers),  # an unknown trigger (below, another url)
            (413, "body_too_large", b"[" + b"1," * 40_000 + b"1]", headers),
            (400, "malformed_json", b"not json", signed(secret, b"not json")),
        ]
        for status, code, content, sent in refusals:
            target = "/api/triggers/trg_" + "0" * 32 if status == 404 else url
            answer = await anyone.post(target, content=content, headers=sent)
            assert answer.status_code == status, (code, answer.text)
            assert answer.json()["error"]["code"] == code

    trace = (await alice.get(f"/api/traces/{run_id}")).json()
    assert trace["trigger_id"] == tid
    messages = (await alice.get(f"/api/traces/{run_id}/messages")).json()["messages"]
    assert messages[0]["content"] == "triage disk full by ops"
    on_log = await created_on_log(store, "trigger_id", tid)
    assert sorted(on_log) == sorted({run_id, one_id, three.json()["trace_id"]})
    assert (await alice.delete(f"/api/triggers/{tid}")).status_code == 200


async def test_a_payload_multiplied_by_its_template_is_refused_whole(
    gateways: tuple[RunningGateway, RunningGateway], alice: httpx.AsyncClient, store: EventStore
) -> None:
    """A template that repeats ``{{payload}}`` 150 times, fired with a 60 KB body: 413 before
    anything is built or started (it was a 9 MB event, refused by NATS as a 503)."""
    messages = [user_message("{{payload}} " * 3)] * 50
    template = {"kind": "trace", "body": {"messages": messages, "model": "scripted:auto"}}
    created = await alice.post("/api/triggers", json={"name": "amplified", "template": template})
    assert created.status_code == 201, created.text
    trigger = created.json()
    body = json.dumps({"x": "y" * 60_000}).encode()
    async with gateways[0].client() as anyone:
        answer = await anyone.post(
            trigger["url"], content=body, headers=signed(trigger["secret"], body)
        )
    assert answer.status_code == 413, answer.text
    assert answer.json()["error"]["code"] == "body_too_large"
    assert await created_on_log(store, "trigger_id", trigger["trigger_id"]) == []
    assert (await alice.delete(f"/api/triggers/{trigger['trigger_id']}")).status_code == 200


async def test_a_webhook_flood_is_refused_per_address_before_any_lookup(
    gateways: tuple[RunningGateway, RunningGateway], alice: httpx.AsyncClient, store: EventStore
) -> None:
    """Twice the limit at once, half to an unknown trigger (404 while there are tokens), half
    correctly signed (each a new delivery): beyond the bucket every request is 429 with
    ``Retry-After``, the unknown trigger's too (so the refusal comes before the lookup), and a
    refused delivery starts nothing. Once ``Retry-After`` has passed a signed request works."""
    created = await alice.post("/api/triggers", json={"name": "flooded", "template": TRACE})
    tid, secret, url = (created.json()[k] for k in ("trigger_id", "secret", "url"))
    body = b"{}"
    unknown = "/api/triggers/trg_" + "f" * 32
    async with gateways[0].client() as anyone:
        started = time.monotonic()
        answers = []
        for n in range(2 * WEBHOOK_LIMIT):
            target = unknown if n % 2 else url
            sent = signed(secret, body, key=f"flood-{n}")
            answers.append((target, await anyone.post(target, content=body, headers=sent)))
        elapsed = time.monotonic() - started
        refused = [a for _, a in answers if a.status_code == 429]
        let_through = [(t, a.status_code) for t, a in answers if a.status_code != 429]
        # The bucket holds WEBHOOK_LIMIT and refills one every 2 s while the flood lasts.
        assert len(let_through) <= WEBHOOK_LIMIT + 1 + elapsed / 2
        assert {status for t, status in let_through} <= {202, 404}
        assert all(status == (404 if t == unknown else 202) for t, status in let_through)
        assert any(t == unknown for t, a in answers if a.status_code == 429)
        for answer in refused:
            assert answer.json()["error"]["code"] == "rate_limited"
            assert int(answer.headers["Retry-After"]) >= 1
        # Only the deliveries let through started a run.
        ran = {a.json()["trace_id"] for t, a in answers if a.status_code == 202}
        assert sorted(await created_on_log(store, "trigger_id", tid)) == sorted(ran)

        late = signed(secret, body, key="after-the-window")
        while (answer := await anyone.post(url, content=body, headers=late)).status_code == 429:
            assert time.monotonic() - started < DEADLINE_S + elapsed, "never let through again"
            await asyncio.sleep(int(answer.headers["Retry-After"]))  # the window itself
        assert answer.status_code == 202, answer.text
    on_log = await created_on_log(store, "trigger_id", tid)
    assert answer.json()["trace_id"] in on_log and len(on_log) == len(ran) + 1
    assert (await alice.delete(f"/api/triggers/{tid}")).status_code == 200
