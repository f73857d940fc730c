"""A revoked key stops: a real gateway restarted with a config that no longer lists a key.

Before the restart the key has a signed trigger, a one-second schedule that has started runs,
a run in flight (an executor parked it waiting on a person) and runs queued for an executor
that is not there. After it: the webhook answers 404 as for an unknown trigger, the schedule
is paused with ``paused_reason: key_revoked`` and starts nothing more, every run of the key
is asked to stop (reason ``key_revoked``) and ends ``stopped`` without another model turn,
the other key's schedule and run carry on, and the operator's ``GET /api/admin/keys`` lists
what the revoked key left until it is erased.
"""

from __future__ import annotations

import hashlib
import time
from pathlib import Path
from typing import Any

from longhaul.core.config import NatsConfig
from longhaul.core.connection import Connection
from longhaul.core.store import EventStore
from longhaul.domain import events as ev
from longhaul.gateway.auth import owner_id
from longhaul.gateway.schedules.records import ScheduleRecord
from longhaul.gateway.schedules.signing import signature
from longhaul.gateway.schedules.store import ScheduleStore

from tests.integration.cli.harness import cli_env, longhaul
from tests.integration.gateway.harness import gateway_config, serve_gateway, user_message
from tests.support.jetstream import created_events
from tests.support.stack import InProcessExecutor, eventually, wait_for_trace, waiting

ALICE, BOB, OPERATOR = "revoked-alice-0123456789", "kept-bob-0123456789", "operator-0123456789"
DEADLINE_S = 30.0
PLAIN = {"messages": [user_message("hello")], "model": "scripted:auto"}
ASKING = {**PLAIN, "tools": ["ask_human"]}


def owner_of(key: str) -> str:
    return owner_id(hashlib.sha256(key.encode()).digest())


def signed(secret: str, body: bytes) -> dict[str, str]:
    timestamp = str(int(time.time()))
    return {
        "X-Longhaul-Timestamp": timestamp,
        "X-Longhaul-Signature": signature(secret, timestamp, body, None),
        "Content-Type": "application/json",
    }


async def scheduled_runs(conn: Connection, schedule_id: str) -> list[str]:
    """Every run the schedule started, read from the log."""
    events = await created_events(conn, "trace")
    return [e.aggregate_id for e in events if getattr(e, "schedule_id", None) == schedule_id]


async def test_a_key_removed_from_the_config_stops_at_the_restart(
    nats_config: NatsConfig, conn: Connection, nats_url: str, namespace: str, tmp_path: Path
) -> None:
    store = EventStore(conn)
    schedules = ScheduleStore(conn)
    alice_owner = owner_of(ALICE)
    every = {"every_s": 1, "overlap": "allow", "template": {"kind": "trace", "body": PLAIN}}
    both = gateway_config(nats_config, api_keys=f"{ALICE},{BOB}", admin_keys=[OPERATOR])
    async with serve_gateway(both) as gateway, gateway.client(ALICE) as alice:
        async with InProcessExecutor(nats_url, namespace, settings={"working_root": tmp_path}):
            in_flight = (await alice.post("/api/traces", json=ASKING)).json()["trace_id"]
            await wait_for_trace(store, in_flight, waiting, within=DEADLINE_S)
        queued = (await alice.post("/api/traces", json=PLAIN)).json()["trace_id"]
        made = await alice.post("/api/schedules", json={"name": "often", **every})
        assert made.status_code == 201, made.text
        schedule_id = made.json()["schedule_id"]
        hook = await alice.post(
            "/api/triggers", json={"name": "hook", "template": made.json()["template"]}
        )
        assert hook.status_code == 201, hook.text
        trigger: dict[str, Any] = hook.json()
        await eventually(lambda: scheduled_runs(conn, schedule_id), within=DEADLINE_S)

    only_bob = gateway_config(nats_config, api_keys=BOB, admin_keys=[OPERATOR])
    async with (
        serve_gateway(only_bob) as gateway,
        gateway.client(ALICE) as alice,
        gateway.client(BOB) as bob,
        gateway.client(OPERATOR) as operator,
        gateway.client() as anyone,
    ):
        assert (await alice.get("/api/info")).status_code == 401
        body = b'{"x": 1}'
        fired = await anyone.post(
            trigger["url"], content=body, headers=signed(trigger["secret"], body)
        )
        assert fired.status_code == 404, fired.text
        assert fired.json()["error"]["code"] == "not_found"

        async def paused() -> ScheduleRecord | None:
            found = await schedules.get(alice_owner, schedule_id)
            return found[0] if found and found[0].paused else None

        record = await eventually(paused, within=DEADLINE_S)
        assert record.paused_reason == "key_revoked"
        # the other key's schedule ticks on: its runs start after the pause was saved
        bobs = await bob.post("/api/schedules", json={"name": "often", **every})
        bob_schedule = bobs.json()["schedule_id"]
        await eventually(lambda: scheduled_runs(conn, bob_schedule), within=DEADLINE_S)
        bob_run = (await bob.post("/api/traces", json=PLAIN)).json()["trace_id"]
        started = await scheduled_runs(conn, schedule_id)
        assert sorted(started) == sorted(run.run_id for run in record.runs)

        async with InProcessExecutor(nats_url, namespace, settings={"working_root": tmp_path}):
            for run_id in [in_flight, queued, *started]:
                state = await wait_for_trace(store, run_id, within=DEADLINE_S)
                assert state.status == "stopped", run_id
                events = [r.event async for r in store.replay("trace", run_id)]
                asked = [e.reason for e in events if isinstance(e, ev.StopRequested)]
                assert asked == ["key_revoked"], run_id
                if run_id != in_flight:  # a queued run never reached the model
                    assert [m.role for m in state.all_messages()] == ["user"]
            done = await wait_for_trace(store, bob_run, within=DEADLINE_S)
            assert done.status == "completed"
        assert await scheduled_runs(conn, schedule_id) == started

        assert (await bob.get("/api/admin/keys")).status_code == 401  # a tenant's key
        listed = await operator.get("/api/admin/keys")
        assert listed.status_code == 200, listed.text
        rows = {row["owner"]: row for row in listed.json()["keys"]}
        assert rows[owner_of(BOB)]["configured"] is True
        assert rows[alice_owner] == {
            "owner": alice_owner,
            "configured": False,
            "traces": 2 + len(started),
            "active_traces": 0,
            "tasks": 0,
            "schedules": 1,
            "paused_schedules": 1,
            "triggers": 1,
        }
        listing = await longhaul(
            "keys", "ls", "--revoked", url=gateway.url, env=cli_env(LONGHAUL_API_KEY=OPERATOR)
        )
        assert listing.code == 0, listing.output
        assert alice_owner in listing.stdout and "revoked" in listing.stdout
        assert owner_of(BOB) not in listing.stdout
        erased = await operator.delete(f"/api/admin/keys/{alice_owner}/data")
        assert erased.status_code == 200, erased.text
        after = (await operator.get("/api/admin/keys")).json()["keys"]
        assert alice_owner not in {row["owner"] for row in after}


async def test_a_gateway_on_the_old_key_list_leaves_a_new_key_alone(
    nats_config: NatsConfig, conn: Connection
) -> None:
    """A rolling change that adds a key: the gateway still on the old list serves the new key
    nothing, but neither pauses its schedule nor stops its runs (they were not there when it
    started); the new gateway ticks the schedule."""
    older = gateway_config(nats_config, api_keys=BOB)
    newer = gateway_config(nats_config, api_keys=f"{ALICE},{BOB}")
    every = {"every_s": 1, "overlap": "allow", "template": {"kind": "trace", "body": PLAIN}}
    async with serve_gateway(older), serve_gateway(newer) as new, new.client(ALICE) as alice:
        made = await alice.post("/api/schedules", json={"name": "new", **every})
        assert made.status_code == 201, made.text
        schedule_id = made.json()["schedule_id"]

        async def two_runs() -> list[str] | None:
            runs = await scheduled_runs(conn, schedule_id)
            return runs if len(runs) >= 2 else None

        runs = await eventually(two_runs, within=DEADLINE_S)
        found = await ScheduleStore(conn).get(owner_of(ALICE), schedule_id)
        assert found is not None and not found[0].paused, found
        for run_id in runs:
            assert not (await new.runtime.traces.load(run_id)).stop_requested
