"""``POST /ag-ui`` through a real gateway and executor on a scripted model, read with httpx and
parsed with the ``ag-ui-protocol`` package's own event types, and by the official
``@ag-ui/client`` from npm: a run's events in order (text
deltas, tool calls and results, goal-tree snapshots), a question and an approval that end the
run with interrupts and are answered by the next input on the same trace, a re-attach, a
failed run as ``RUN_ERROR``, and two keys whose threads of the same name never meet."""

from __future__ import annotations

import asyncio
import json
import os
import uuid
from pathlib import Path
from typing import Any

from ag_ui.core import Event, EventType
from pydantic import TypeAdapter

from tests.integration.executor.scripts import write_script
from tests.integration.gateway.harness import KEY_A, KEY_B, RunningGateway, sse_events
from tests.support import npm

DEADLINE_S = 60
AG_UI_CLIENT = "@ag-ui/client@1.0.0"
_event = TypeAdapter(Event)


def run_input(thread: str, *messages: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {
        "threadId": thread,
        "runId": uuid.uuid4().hex,
        "messages": list(messages),
        "tools": [],
        "context": [],
        "state": {},
        **extra,
    }


def user(text: str, mid: str | None = None) -> dict[str, Any]:
    return {"id": mid or uuid.uuid4().hex, "role": "user", "content": text}


async def run(gateway: RunningGateway, key: str, body: dict[str, Any]) -> list[Any]:
    """The run's AG-UI events, each validated by the package's own models."""
    events: list[Any] = []
    async with (
        asyncio.timeout(DEADLINE_S),
        gateway.client(key) as http,
        http.stream("POST", "/ag-ui", json=body) as response,
    ):
        assert response.status_code == 200, await response.aread()
        assert response.headers["content-type"].startswith("text/event-stream")
        async for sse in sse_events(response):
            if sse.data:
                events.append(_event.validate_python(json.loads(sse.data)))
    return events


def asks_then_answers(tmp_path: Path) -> str:
    """A model that asks "which?" (call q1), then answers twice."""
    ask = {"id": "q1", "name": "ask_human", "arguments": {"question": "which?"}}
    turns: list[dict[str, Any]] = [
        {"tool_calls": [ask]},
        {"content": "blue it is"},
        {"content": "and again"},
    ]
    return write_script(tmp_path / "ask.yaml", turns)


def types(events: list[Any]) -> list[str]:
    return [e.type.value for e in events]


def finished(events: list[Any]) -> Any:
    assert events[-1].type == EventType.RUN_FINISHED, types(events)
    return events[-1]


async def test_a_run_streams_text_tool_calls_results_and_the_goal_tree(
    keyed_stack: RunningGateway, tmp_path: Path
) -> None:
    model = write_script(
        tmp_path / "run.yaml",
        [
            {
                "tool_calls": [
                    {"id": "g1", "name": "goal", "arguments": {"op": "add", "title": "look"}}
                ]
            },
            {"content": "all done here"},
        ],
    )
    thread = uuid.uuid4().hex
    events = await run(
        keyed_stack, KEY_A, run_input(thread, user("plan it"), forwardedProps={"model": model})
    )
    assert events[0].type == EventType.RUN_STARTED and events[0].thread_id == thread
    # the goal's snapshot comes as the goal changes, before the call's result
    events_ = [e for e in events if e.type != EventType.STATE_SNAPSHOT]
    kinds = types(events_)
    start = kinds.index("TOOL_CALL_START")
    assert kinds[start : start + 4] == [
        "TOOL_CALL_START",
        "TOOL_CALL_ARGS",
        "TOOL_CALL_END",
        "TOOL_CALL_RESULT",
    ]
    assert events_[start].tool_call_name == "goal"
    assert json.loads(events_[start + 1].delta) == {"op": "add", "title": "look"}
    assert events_[start + 3].tool_call_id == "g1"
    # the text: opened, its deltas, closed; what the deltas carry is the whole answer
    text = [e for e in events if e.type.value.startswith("TEXT_MESSAGE")]
    assert text[0].type == EventType.TEXT_MESSAGE_START
    assert text[-1].type == EventType.TEXT_MESSAGE_END
    assert "".join(e.delta for e in text[1:-1]) == "all done here"
    assert len({e.message_id for e in text}) == 1
    assert "-live-" in text[0].message_id  # opened by a live delta, not the stored message
    # the goal tree: a snapshot after the goal was added, and the final one
    snapshots = [e.snapshot for e in events if e.type == EventType.STATE_SNAPSHOT]
    titles = [g["title"] for g in snapshots[-1]["goal_tree"]["goals"]]
    assert "look" in titles
    assert snapshots[-1]["status"] == "completed"
    end = finished(events)
    assert end.outcome is None or end.outcome.type == "success"
    assert end.result["status"] == "completed"


async def test_a_question_interrupts_and_the_resume_continues_the_same_trace(
    keyed_stack: RunningGateway, tmp_path: Path
) -> None:
    model = asks_then_answers(tmp_path)
    thread = uuid.uuid4().hex
    first = user("paint it")
    asked = await run(keyed_stack, KEY_A, run_input(thread, first, forwardedProps={"model": model}))
    outcome = finished(asked).outcome
    assert outcome.type == "interrupt"
    [interrupt] = outcome.interrupts
    assert (interrupt.id, interrupt.reason, interrupt.message) == (
        "question:q1",
        "question",
        "which?",
    )
    trace_id = finished(asked).result["trace_id"]

    resumed = await run(
        keyed_stack,
        KEY_A,
        run_input(
            thread,
            first,
            resume=[{"interruptId": "question:q1", "status": "resolved", "payload": "blue"}],
        ),
    )
    assert finished(resumed).result["trace_id"] == trace_id
    assert finished(resumed).result["status"] == "completed"
    deltas = [e.delta for e in resumed if e.type == EventType.TEXT_MESSAGE_CONTENT]
    assert "".join(deltas) == "blue it is"
    # an interrupt that is not pending is refused, and nothing is appended
    async with keyed_stack.client(KEY_A) as http:
        stale = run_input(
            thread, first, resume=[{"interruptId": "question:q1", "status": "resolved"}]
        )
        refused = await http.post("/ag-ui", json=stale)
        assert refused.status_code == 409
        assert refused.json()["error"]["code"] == "interrupt_not_pending"
        # nothing new: a re-attach shows the thread's messages and the settled outcome
    again = await run(keyed_stack, KEY_A, run_input(thread, first))
    assert "MESSAGES_SNAPSHOT" in types(again)
    [snapshot] = [e for e in again if e.type == EventType.MESSAGES_SNAPSHOT]
    assert [m.content for m in snapshot.messages if m.role == "user"] == ["paint it"]
    assert finished(again).result["status"] == "completed"
    # a new user message after the answer is the next turn of the same trace
    history = [first, {"id": "a1", "role": "assistant", "content": "blue it is"}, user("more")]
    turn = await run(keyed_stack, KEY_A, run_input(thread, *history))
    assert finished(turn).result["trace_id"] == trace_id
    assert "".join(e.delta for e in turn if e.type == EventType.TEXT_MESSAGE_CONTENT) == (
        "and again"
    )


async def test_approvals_interrupt_and_a_resume_applies_all_answers_or_none(
    keyed_stack: RunningGateway, tmp_path: Path
) -> None:
    calls = [
        {"id": "c1", "name": "bash", "arguments": {"command": "echo one"}},
        {"id": "c2", "name": "bash", "arguments": {"command": "echo two"}},
    ]
    model = write_script(
        tmp_path / "approve.yaml", [{"tool_calls": calls}, {"content": "left them alone"}]
    )
    thread = uuid.uuid4().hex
    first = user("run it")
    props = {"model": model, "approval": ["bash"]}
    waiting = await run(keyed_stack, KEY_A, run_input(thread, first, forwardedProps=props))
    asked = finished(waiting).outcome.interrupts
    assert [(i.id, i.reason, i.tool_call_id) for i in asked] == [
        ("approval:c1", "approval", "c1"),
        ("approval:c2", "approval", "c2"),
    ]
    assert asked[0].response_schema["required"] == ["approved"]
    # the calls were streamed before the wait, without results
    assert "TOOL_CALL_START" in types(waiting) and "TOOL_CALL_RESULT" not in types(waiting)
    trace_id = finished(waiting).result["trace_id"]

    deny = {"interruptId": "approval:c1", "status": "resolved", "payload": {"approved": False}}
    bad = {"interruptId": "approval:c2", "status": "resolved", "payload": {"approved": "hm"}}
    async with keyed_stack.client(KEY_A) as http:
        refused = await http.post("/ag-ui", json=run_input(thread, first, resume=[deny, bad]))
        assert refused.status_code == 422, refused.text
        # the valid answer before the bad one was not applied either
        pending = (await http.get(f"/api/traces/{trace_id}")).json()
        assert pending["status"] == "waiting"
        assert len(pending["pending_approvals"]) == 2, pending["pending_approvals"]

    cancel = {"interruptId": "approval:c2", "status": "cancelled"}
    denied = await run(keyed_stack, KEY_A, run_input(thread, first, resume=[deny, cancel]))
    results = [e.tool_call_id for e in denied if e.type == EventType.TOOL_CALL_RESULT]
    assert sorted(results) == ["c1", "c2"]
    assert finished(denied).result["status"] == "completed"


async def test_calls_left_to_the_front_end_are_pending_and_its_tool_messages_answer_them(
    keyed_stack: RunningGateway, tmp_path: Path
) -> None:
    call = {"id": "c1", "name": "bash", "arguments": {"command": "echo hi"}}
    model = write_script(
        tmp_path / "client.yaml", [{"tool_calls": [call]}, {"content": "thanks for running it"}]
    )
    thread = uuid.uuid4().hex
    first = user("run it over there")
    props = {"model": model, "auto_execute_tools": False}
    handed = await run(keyed_stack, KEY_A, run_input(thread, first, forwardedProps=props))
    outcome = finished(handed).outcome
    assert outcome.type == "success" and outcome.pending_tool_call_ids == ["c1"]
    [start] = [e for e in handed if e.type == EventType.TOOL_CALL_START]
    # the conversation as the client now holds it: the call, then the result it ran
    function = {"name": "bash", "arguments": '{"command": "echo hi"}'}
    called = {
        "id": start.parent_message_id,
        "role": "assistant",
        "toolCalls": [{"id": "c1", "type": "function", "function": function}],
    }
    result = {"id": "r1", "role": "tool", "toolCallId": "c1", "content": "hi"}
    answered = await run(keyed_stack, KEY_A, run_input(thread, first, called, result))
    texts = [e.delta for e in answered if e.type == EventType.TEXT_MESSAGE_CONTENT]
    assert "".join(texts) == "thanks for running it"
    assert finished(answered).result["trace_id"] == finished(handed).result["trace_id"]
    async with keyed_stack.client(KEY_A) as http:
        trace_id = finished(handed).result["trace_id"]
        path = (await http.get(f"/api/traces/{trace_id}/messages")).json()["messages"]
    assert [m["content"] for m in path if m["role"] == "tool"] == ["hi"]


async def test_a_front_end_that_dropped_its_stream_reattaches_to_the_running_run(
    keyed_stack: RunningGateway, tmp_path: Path
) -> None:
    # the call runs until the test lets it go (a file in its working directory), at most 60 s
    gate = "for i in $(seq 600); do [ -f go ] && break; sleep 0.1; done; echo ok"
    call = {"id": "slow", "name": "bash", "arguments": {"command": gate}}
    model = write_script(
        tmp_path / "slow.yaml", [{"tool_calls": [call]}, {"content": "woke up again"}]
    )
    thread, first = uuid.uuid4().hex, user("take your time")
    body = run_input(thread, first, forwardedProps={"model": model})
    again: list[Any] = []
    async with asyncio.timeout(DEADLINE_S), keyed_stack.client(KEY_A) as http:
        async with http.stream("POST", "/ag-ui", json=body) as response:
            trace_id = response.headers["x-longhaul-trace-id"]
            async for sse in sse_events(response):
                if sse.data and json.loads(sse.data)["type"] == "TOOL_CALL_END":
                    break  # the front end goes away while the call runs
        # made before the model was called: <working_root>/keys/<owner>/<trace id>
        [workdir] = (tmp_path / "work").rglob(trace_id)
        async with http.stream("POST", "/ag-ui", json=run_input(thread, first)) as response:
            async for sse in sse_events(response):
                if not sse.data:
                    continue
                again.append(_event.validate_python(json.loads(sse.data)))
                if again[-1].type == EventType.MESSAGES_SNAPSHOT:  # re-attached: let it go
                    (workdir / "go").touch()
    [snapshot] = [e for e in again if e.type == EventType.MESSAGES_SNAPSHOT]
    assert [m.role for m in snapshot.messages] == ["user", "assistant"]
    assert "".join(e.delta for e in again if e.type == EventType.TEXT_MESSAGE_CONTENT) == (
        "woke up again"
    )
    assert [e.tool_call_id for e in again if e.type == EventType.TOOL_CALL_RESULT] == ["slow"]
    assert finished(again).result["status"] == "completed"


async def test_a_failed_run_ends_with_run_error(
    keyed_stack: RunningGateway, tmp_path: Path
) -> None:
    filtered = write_script(
        tmp_path / "filtered.yaml", [{"content": "I can't", "finish_reason": "content_filter"}]
    )
    props = {"model": filtered}
    events = await run(
        keyed_stack, KEY_A, run_input(uuid.uuid4().hex, user("x"), forwardedProps=props)
    )
    assert events[-1].type == EventType.RUN_ERROR, types(events)
    assert events[-1].code == "content_filter"
    assert "RUN_FINISHED" not in types(events)
    # a model no run could use is refused before the stream starts
    body = run_input(uuid.uuid4().hex, user("x"), forwardedProps={"model": "scripted:/nope.yaml"})
    async with keyed_stack.client(KEY_A) as http:
        assert (await http.post("/ag-ui", json=body)).status_code == 422


async def test_another_keys_thread_of_the_same_name_is_another_trace(
    keyed_stack: RunningGateway, tmp_path: Path
) -> None:
    model = write_script(
        tmp_path / "iso.yaml",
        [{"tool_calls": [{"id": "q1", "name": "ask_human", "arguments": {"question": "secret?"}}]}],
    )
    thread = uuid.uuid4().hex
    mine = await run(
        keyed_stack, KEY_A, run_input(thread, user("mine"), forwardedProps={"model": model})
    )
    mine_id = finished(mine).result["trace_id"]
    # B names A's thread and answers A's interrupt: refused, A's trace untouched
    async with keyed_stack.client(KEY_B) as http:
        resume = [{"interruptId": "question:q1", "status": "resolved", "payload": "leak"}]
        refused = await http.post("/ag-ui", json=run_input(thread, user("x"), resume=resume))
        assert refused.status_code == 409
        assert (await http.get(f"/api/traces/{mine_id}")).status_code == 404
    # B's input on the same thread id starts a run of its own and never shows A's messages
    own = user("theirs")
    theirs = await run(keyed_stack, KEY_B, run_input(thread, own, forwardedProps={"model": model}))
    assert finished(theirs).result["trace_id"] != mine_id
    again = await run(keyed_stack, KEY_B, run_input(thread, own))
    [snapshot] = [e for e in again if e.type == EventType.MESSAGES_SNAPSHOT]
    assert [m.content for m in snapshot.messages if m.role == "user"] == ["theirs"]
    assert finished(again).result["trace_id"] != mine_id
    async with keyed_stack.client(KEY_A) as http:
        path = (await http.get(f"/api/traces/{mine_id}/messages")).json()["messages"]
    assert [m["content"] for m in path if m["role"] == "user"] == ["mine"]


async def test_refusals(keyed_stack: RunningGateway) -> None:
    async with keyed_stack.client("not-a-key") as http:
        assert (await http.post("/ag-ui", json=run_input("t", user("x")))).status_code == 401
    async with keyed_stack.client(KEY_A) as http:
        tools = [{"name": "f", "description": "d", "parameters": {}}]
        with_tools = await http.post("/ag-ui", json=run_input("t", user("x"), tools=tools))
        assert with_tools.status_code == 422
        assert with_tools.json()["error"]["code"] == "tools_not_supported"
        assert (await http.post("/ag-ui", json={"threadId": "t"})).status_code == 422
        # a part the trace cannot take is a 422 naming it (schemathesis found a 500 here)
        document = {"type": "document", "source": {"type": "file", "value": "f"}}
        tool = {"id": "m", "role": "tool", "toolCallId": "c", "content": [document]}
        refused = await http.post("/ag-ui", json=run_input("t", tool))
        assert refused.status_code == 422, refused.text
        assert "document part" in refused.json()["error"]["message"]


async def test_the_official_ag_ui_client_runs_answers_and_continues_a_thread(
    keyed_stack: RunningGateway, tmp_path: Path
) -> None:
    """@ag-ui/client's HttpAgent (pinned, from npm) against /ag-ui: its own event verifier
    and state machine accept the stream, it answers the question interrupt with ``resume``
    and sends the next message, all on one trace."""
    node = npm.node(18)
    modules = npm.npm_install(AG_UI_CLIENT) / "node_modules"
    model = asks_then_answers(tmp_path)
    config = {"url": f"{keyed_stack.url}/ag-ui", "key": KEY_A, "thread": uuid.uuid4().hex}
    process = await asyncio.create_subprocess_exec(
        node,
        str(Path(__file__).with_name("ag_ui_client.cjs")),
        json.dumps({**config, "model": model}),
        env={**os.environ, "NODE_PATH": str(modules), "SUPPRESS_TRANSFORMATION_WARNINGS": "1"},
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    async with asyncio.timeout(DEADLINE_S):
        out, err = await process.communicate()
    assert process.returncode == 0, err.decode()
    seen = json.loads(out)
    asked, answered, next_turn = seen["runs"]
    assert asked["outcome"] == "interrupt" and asked["error"] is None
    assert [i["id"] for i in asked["interrupts"]] == ["question:q1"]
    assert asked["events"][0] == "RUN_STARTED" and "TOOL_CALL_START" in asked["events"]
    assert answered["outcome"] == "success"
    assert "TEXT_MESSAGE_CONTENT" in answered["events"]
    assert "goal_tree" in answered["state"]
    trace_ids = {r["result"]["trace_id"] for r in (answered, next_turn)}
    assert len(trace_ids) == 1
    texts = [m.get("content") for m in seen["messages"] if m["role"] == "assistant"]
    assert "blue it is" in texts and "and again" in texts
    async with keyed_stack.client(KEY_A) as http:
        path = (await http.get(f"/api/traces/{trace_ids.pop()}/messages")).json()["messages"]
    assert [m["content"] for m in path if m["role"] == "user"] == ["paint it", "more"]
