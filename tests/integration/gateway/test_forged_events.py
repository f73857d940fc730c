"""Reads no event can break (issue 17 item 7), through the stack as a hostile writer would try
it: with a plain NATS client, bytes that are no event and well-formed events that cannot
happen are published on a waiting trace's subjects. GET shows them as faults, /messages and
the event stream keep answering, the trace still takes a reply and the executor runs it to
the end; a second poisoned trace can still be stopped."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import httpx
import msgspec
from longhaul.core.store import EventStore
from longhaul.domain import events as ev

from tests.integration.executor.scripts import write_script
from tests.integration.gateway.harness import sse_events, user_message
from tests.support.stack import ExecutorProcess, wait_for_trace, waiting

DEADLINE_S = 60


def forged(trace_id: str) -> list[tuple[str, bytes]]:
    """(event type of the subject, payload) pairs no checked writer would ever write."""

    def event(item: ev.TraceEvent, **envelope: Any) -> bytes:
        raw = msgspec.json.decode(ev.encode(item))
        raw.update({"aggregate_id": trace_id, **envelope})
        return msgspec.json.encode(raw)

    message = ev.MessageAppended(sequence=1, parent_sequence=0, role="assistant", content="x")
    return [
        ("message_appended", b"\x00\xb2\xff not json"),
        ("completed", b'{"type": "completed", "summary": 7}'),
        ("message_appended", b'{"type": "no_such_event"}'),
        ("message_appended", b"[]"),
        ("message_appended", b"9" * 400),
        ("message_appended", event(message)),  # reuses sequence 1
        (
            "message_appended",
            event(ev.MessageAppended(sequence=50, parent_sequence=49, role="tool", content="?")),
        ),
        ("compacted", event(ev.Compacted(summary_sequence=999, range=(5, 2)))),
        ("goal_changed", event(ev.GoalChanged(op="done", goal=ev.Goal(id="g_nope", title="x")))),
        ("verification_passed", event(ev.VerificationPassed(attempt=3))),
        ("human_replied", event(ev.HumanReplied(content="for someone else"), aggregate_id="t_x")),
        ("trace_created", event(ev.TraceCreated(messages=[]))),
    ]


async def test_forged_bytes_and_impossible_events_break_no_read_and_no_run(
    client: httpx.AsyncClient, store: EventStore, nats_url: str, namespace: str, tmp_path: Path
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    ask = write_script(
        tmp_path / "ask.yaml",
        [
            {"tool_calls": [{"name": "ask_human", "arguments": {"question": "colour?"}}]},
            {"content": "blue it is"},
        ],
    )
    env = {"LONGHAUL_EXECUTOR__WORKING_ROOT": str(work)}
    js = store.conn.js
    names = store.conn.names
    async with ExecutorProcess(nats_url, namespace, "exec-forged", env=env):
        body = {"messages": [user_message("pick a colour")], "model": ask}
        trace_id = (await client.post("/api/traces", json=body)).json()["trace_id"]
        await wait_for_trace(store, trace_id, waiting, within=DEADLINE_S)
        attacks = forged(trace_id)
        for event_type, payload in attacks:
            await js.publish(names.subject("trace", trace_id, event_type), payload)

        view = await client.get(f"/api/traces/{trace_id}")
        assert view.status_code == 200, view.text
        shown = view.json()
        assert (shown["status"], shown["wait_reason"]) == ("waiting", "human")
        # Every forgery is a fault — the reply naming another trace too — except the
        # compaction marker, which changes nothing a read depends on.
        assert shown["faults"] == len(attacks) - 1, shown["fault_log"]
        assert "compacted" not in [fault["type"] for fault in shown["fault_log"]]
        for mode in ("main_path", "all"):
            listed = await client.get(f"/api/traces/{trace_id}/messages", params={"mode": mode})
            assert listed.status_code == 200, listed.text
            assert [m["sequence"] for m in listed.json()["messages"]][:2] == [1, 2]
        assert (await client.get(f"/api/traces/{trace_id}/context")).status_code in (200, 404)
        assert (await client.get("/api/traces")).status_code == 200
        assert (await client.get("/metrics")).status_code == 200

        reply = await client.post(f"/api/traces/{trace_id}/reply", json={"content": "blue"})
        assert reply.status_code == 202, reply.text
        done = await wait_for_trace(store, trace_id, within=DEADLINE_S)
        assert done.status == "completed", (done.status, done.error)
        final = (await client.get(f"/api/traces/{trace_id}/messages")).json()["messages"]
        assert final[-1]["content"] == "blue it is"

        # Another trace, poisoned the same way, is still stopped by its owner.
        again = (await client.post("/api/traces", json={**body, "model": ask})).json()["trace_id"]
        await wait_for_trace(store, again, waiting, within=DEADLINE_S)
        for event_type, payload in forged(again):
            await js.publish(names.subject("trace", again, event_type), payload)
        stop = await client.post(f"/api/traces/{again}/stop")
        assert stop.status_code == 202, stop.text
        stopped = await wait_for_trace(store, again, within=DEADLINE_S)
        assert stopped.status == "stopped"
        seen: list[str] = []
        async with (
            asyncio.timeout(DEADLINE_S),
            client.stream("GET", f"/api/traces/{again}/events") as response,
        ):
            assert response.status_code == 200
            async for item in sse_events(response):
                if item.id is not None:
                    seen.append(item.event)
                if item.event == "stopped":
                    break
        assert seen[0] == "trace_created" and seen[-1] == "stopped"
