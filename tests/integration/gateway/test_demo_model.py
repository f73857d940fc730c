"""``scripted:demo`` on a real stack: the offline run ``make run`` shows plans with the goal
tool, lists and reads the workdir, writes a result file, delegates a check to a sub-agent,
marks its goals done and says what it did."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import httpx
import pytest
from longhaul.core.connection import connect
from longhaul.core.store import EventStore
from longhaul.domain import events as ev
from longhaul.domain.state import TraceState
from longhaul.gateway.auth import LOCAL_OWNER
from longhaul.llm.scripted.demo import CONTEXT_NOTE, RESULT_FILE

from tests.integration.gateway.harness import RunningGateway
from tests.integration.gateway.test_health import samples

DEADLINE_S = 60


async def until_ended(http: httpx.AsyncClient, trace_id: str, after: int = 0) -> None:
    headers = {"Last-Event-ID": str(after)} if after else {}
    async with asyncio.timeout(DEADLINE_S):
        url = f"/api/traces/{trace_id}/events"
        async with http.stream("GET", url, headers=headers) as events:
            async for line in events.aiter_lines():
                if line in ("event: completed", "event: failed"):
                    return


def asks_in(transcript: list[dict[str, Any]]) -> list[int]:
    """Where the requests are (the harness's context reminders are user messages too)."""
    return [
        i
        for i, m in enumerate(transcript)
        if m["role"] == "user" and not m["content"].startswith(CONTEXT_NOTE)
    ]


ASK = {"role": "user", "content": "what is in my workdir?"}


async def demo_run(http: httpx.AsyncClient) -> str:
    """A ``scripted:demo`` trace asked :data:`ASK`, ended; its id."""
    created = await http.post(
        "/api/traces", json={"messages": [ASK], "model": "scripted:demo?latency_ms=0"}
    )
    trace_id = str(created.json()["trace_id"])
    await until_ended(http, trace_id)
    return trace_id


async def test_demo_model_plans_reads_writes_delegates_and_reports(
    stack: RunningGateway, tmp_path: Path
) -> None:
    work = tmp_path / "work"
    async with stack.client() as http:
        # Each trace works in a directory of its own (below its key's): a first run makes it,
        # the user's files go there, and the question is asked again.
        trace_id = await demo_run(http)
        home = work / "keys" / LOCAL_OWNER / trace_id
        (home / "notes.txt").write_text("buy milk\ncall Ada\n")
        (home / "todo.md").write_text("# todo\n- ship the viewer\n")
        again = await http.post(f"/api/traces/{trace_id}/run", json={"messages": [ASK]})
        assert again.status_code == 202, again.text
        await until_ended(http, trace_id, after=again.json()["event_id"])
        trace = (await http.get(f"/api/traces/{trace_id}")).json()
        transcript = (await http.get(f"/api/traces/{trace_id}/messages")).json()["messages"]
        path = transcript[asks_in(transcript)[-1] :]

    # The transcript reads as one pass per request: no step repeated, no call refused (a
    # done goal called again), one sub-agent per request.
    asks = asks_in(transcript)
    for start, end in zip(asks, [*asks[1:], len(transcript)], strict=True):
        run = transcript[start:end]
        said = [m["content"] for m in run if m["role"] == "assistant"]
        assert len(said) == len(set(said)), said
        errors = [m["content"] for m in run if m["role"] == "tool" and "Error" in m["content"]]
        assert errors == []
        made = [
            (c["function"]["name"], c["function"]["arguments"])
            for m in run
            for c in m.get("tool_calls") or []
        ]
        assert len(made) == len(set(made)), made
        assert [name for name, _ in made].count("agent") == 1
    assert len(trace["sub_traces"]) == len(asks) == 2

    assert trace["status"] == "completed", trace
    goals = [g for g in trace["goal_tree"]["goals"] if g["type"] == "goal"]
    assert [g["title"] for g in goals][-3:] == [
        "Survey the working directory",
        "Write a short result file",
        "Have a sub-agent check the result",
    ]
    assert {g["status"] for g in goals[-3:]} == {"done"}
    # the sub-agent's call is a goal of its own, under the goal in focus when it was made
    calls_goal = [g for g in trace["goal_tree"]["goals"] if g["type"] == "agent_call"][-1]
    assert calls_goal["parent_id"] == goals[-1]["id"] and calls_goal["status"] == "done"
    calls = [c["function"]["name"] for m in path for c in m.get("tool_calls") or []]
    assert calls.index("goal") < calls.index("glob") < calls.index("read")
    assert calls.index("read") < calls.index("write") < calls.index("agent")
    written = (home / RESULT_FILE).read_text()
    assert "notes.txt" in written and "todo.md" in written
    # the sub-agent ran as a child trace, read the file and reported
    child = trace["sub_traces"][-1]
    assert child["status"] == "completed"
    assert f"Checked {RESULT_FILE}" in child["summary"]
    answer = path[-1]
    assert answer["role"] == "assistant" and answer["content"].startswith("Done.")
    assert "sub-agent checked it" in answer["content"]


async def test_a_run_reports_its_tokens_and_savings_in_totals_and_metrics(
    stack: RunningGateway, tmp_path: Path
) -> None:
    """The demo reads files (one-time outputs: offloading saves their text afterwards) and
    completes goals (level-1 compaction folds them): the trace's totals say how many prompt
    tokens each saving removed, and /metrics sums them with the token counts."""
    async with stack.client() as http:
        trace_id = await demo_run(http)
        home = tmp_path / "work" / "keys" / LOCAL_OWNER / trace_id
        (home / "notes.txt").write_text("buy milk\n" * 200)
        again = await http.post(f"/api/traces/{trace_id}/run", json={"messages": [ASK]})
        await until_ended(http, trace_id, after=again.json()["event_id"])
        trace = (await http.get(f"/api/traces/{trace_id}")).json()
        totals = trace["totals"]
        children = [
            (await http.get(f"/api/traces/{child['trace_id']}")).json()["totals"]
            for child in trace["sub_traces"]
        ]
        path = (await http.get(f"/api/traces/{trace_id}/messages")).json()["messages"]
        saved: dict[str, int] = {}
        for message in path:
            for kind, n in ((message.get("usage") or {}).get("saved_tokens") or {}).items():
                saved[kind] = saved.get(kind, 0) + n
        assert totals["saved_tokens"]["offload"] > 0 and totals["saved_tokens"]["compaction"] > 0
        assert saved == totals["saved_tokens"]  # the totals are the messages' sums
        assert totals["prompt_tokens"] > 0
        everything = [totals, *children]  # the index holds the sub-agents' traces too
        expected = {
            ("longhaul_tokens_total", (("kind", kind),)): sum(
                t[f"{kind}_tokens"] for t in everything
            )
            for kind in ("prompt", "completion", "cache_read", "cache_write")
        } | {
            ("longhaul_tokens_total", (("kind", f"saved_{saving}"),)): sum(
                t["saved_tokens"].get(saving, 0) for t in everything
            )
            for saving in ("offload", "compaction")
        }
        # The index mirror catches up on its own: the executor indexes a trace after its
        # last event, and an earlier entry of the parent already counts some savings.
        async with asyncio.timeout(DEADLINE_S):
            while True:
                values = samples((await http.get("/metrics")).text)
                if all(values.get(key) == n for key, n in expected.items()):
                    break
                await asyncio.sleep(0.05)
    assert {key: values.get(key) for key in expected} == expected
    prompt = sum(t["prompt_tokens"] for t in everything)
    ratio = sum(t["cache_read_tokens"] for t in everything) / prompt
    assert values[("longhaul_cache_hit_ratio", ())] == pytest.approx(ratio)


async def outlines_differing(stack: RunningGateway, trace_id: str) -> list[str]:
    """Each ``goal`` call's output (the tree as the executor folded it when the call ran)
    against the log's fold at that point (what the gateway shows): the steps that differ."""
    conn = await connect(stack.runtime.config.nats)
    try:
        state, names, differing = TraceState(), dict[str, str](), list[str]()
        async for recorded in EventStore(conn).replay("trace", trace_id):
            event = recorded.event
            if isinstance(event, ev.MessageAppended):
                names |= {call.id: call.function.name for call in event.tool_calls or []}
                if event.role == "tool" and names.get(event.tool_call_id or "") == "goal":
                    if event.content != state.goals.render():
                        differing.append(f"#{event.sequence}:\n{event.content}")
            state.apply(event, recorded.seq)
        return differing
    finally:
        await conn.close()


@pytest.mark.parametrize("asked", [True, False], ids=["asked_again", "no_message"])
async def test_a_rewind_into_the_plan_continues_it_each_goal_listed_once(
    stack: RunningGateway, asked: bool
) -> None:
    """Rewound to #8 (the survey's listing, its goals still open), asked again or not, the
    demo carries on with the plan it made instead of making it a second time: the goal tree
    lists each goal once, all done, every outline the run was shown is the gateway's, and
    the result file is written again (not taken for a write cut off by a crash: the
    scripted model's call ids repeat the abandoned branch's)."""
    async with stack.client() as http:
        trace_id = await demo_run(http)
        kept = (await http.get(f"/api/traces/{trace_id}/messages")).json()["messages"][:8]
        assert kept[-1]["role"] == "tool" and kept[-1]["goal_id"] == "g1"  # the survey's
        body: dict[str, Any] = {"after_sequence": 8} | ({"messages": [ASK]} if asked else {})
        rewound = await http.post(f"/api/traces/{trace_id}/run", json=body)
        assert rewound.status_code == 202, rewound.text
        await until_ended(http, trace_id, after=rewound.json()["event_id"])
        trace = (await http.get(f"/api/traces/{trace_id}")).json()
        path = (await http.get(f"/api/traces/{trace_id}/messages")).json()["messages"]

    assert trace["status"] == "completed", trace
    goals = [(g["id"], g["title"], g["status"]) for g in trace["goal_tree"]["goals"]]
    assert [g for g in goals if g[0] != "root" and not g[0].startswith("a")] == [
        ("g1", "Survey the working directory", "done"),
        ("g2", "Write a short result file", "done"),
        ("g3", "Have a sub-agent check the result", "done"),
    ]
    after = path[8:]
    assert [m["sequence"] for m in path[:8]] == list(range(1, 9))
    ops = [
        json.loads(c["function"]["arguments"])["op"]
        for m in after
        for c in m.get("tool_calls") or []
        if c["function"]["name"] == "goal"
    ]
    assert ops and "add" not in ops, ops
    results = [m["content"] for m in after if m["role"] == "tool"]
    wrote = [t for t in results if t.startswith("wrote ") and t.endswith(f" to {RESULT_FILE}")]
    assert wrote, results
    assert after[-1]["content"].startswith("Done.")
    assert await outlines_differing(stack, trace_id) == []
