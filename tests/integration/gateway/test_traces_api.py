"""The trace API end to end over HTTP: every write lands on the log (or is refused before)."""

from __future__ import annotations

import asyncio

import httpx
from longhaul.core.index import TraceIndex
from longhaul.core.store import EventStore, Position
from longhaul.domain import events as ev

from tests.integration.gateway.harness import (
    RunningGateway,
    append_as_executor,
    assistant,
    user_message,
)
from tests.support.folds import trace_state


async def create(client: httpx.AsyncClient, text: str = "hello", **extra: object) -> str:
    response = await client.post("/api/traces", json={"messages": [user_message(text)], **extra})
    assert response.status_code == 202, response.text
    return str(response.json()["trace_id"])


async def events_of(store: EventStore, trace_id: str) -> list[ev.Event]:
    return [r.event async for r in store.replay("trace", trace_id)]


async def test_an_unnamed_trace_is_named_after_its_first_user_message(
    client: httpx.AsyncClient, store: EventStore
) -> None:
    short = await create(client, "  plan\na   trip ")
    long = await create(client, "x" * 100)
    [short_created] = await events_of(store, short)
    [long_created] = await events_of(store, long)
    assert isinstance(short_created, ev.TraceCreated) and short_created.name == "plan a trip"
    assert isinstance(long_created, ev.TraceCreated) and long_created.name == "x" * 59 + "…"


async def test_create_appends_trace_created_and_indexes_it(
    client: httpx.AsyncClient, store: EventStore, gateway: RunningGateway
) -> None:
    response = await client.post(
        "/api/traces",
        json={
            "messages": [user_message("plan a trip")],
            "model": "scripted:auto",
            "preset": "research",
            "tools": ["goal"],
            "max_iterations": 7,
            "name": "trip",
        },
    )
    assert response.status_code == 202
    body = response.json()
    trace_id = body["trace_id"]
    assert body["status"] == "running" and body["event_id"] >= 1
    assert response.headers["location"] == f"/api/traces/{trace_id}"
    [created] = await events_of(store, trace_id)
    assert isinstance(created, ev.TraceCreated)
    assert created.owner == "local" and created.name == "trip"
    assert created.config.model == "scripted:auto" and created.config.preset == "research"
    assert created.config.tools == ["goal"] and created.config.max_iterations == 7
    assert [m.content for m in created.messages] == ["plan a trip"]
    # The index entry is written right after the 202: wait for it on a KV watch.
    kv = await store.conn.kv(store.conn.names.traces)
    watcher = await kv.watch(trace_id)
    try:
        async with asyncio.timeout(10):
            async for item in watcher:
                if item is not None and item.value:
                    break
    finally:
        await watcher.stop()
    entry = await TraceIndex(store.conn).get(trace_id)
    assert entry is not None and entry.status == "running" and entry.owner == "local"


async def test_get_trace_returns_documented_shape(
    client: httpx.AsyncClient, store: EventStore
) -> None:
    trace_id = await create(client, name="shape")
    await append_as_executor(
        store,
        trace_id,
        ev.GoalChanged(op="add", goal=ev.Goal(id="g1", title="find flights")),
        ev.GoalChanged(op="focus", goal=ev.Goal(id="g1", title="")),
        ev.SubtraceSpawned(child_trace_id="t_child", tool_call_id="call_1", task="search"),
    )
    body = (await client.get(f"/api/traces/{trace_id}")).json()
    for key in (
        "trace_id",
        "status",
        "name",
        "parent_trace_id",
        "head_sequence",
        "last_sequence",
        "totals",
        "error",
        "stop_reason",
        "goal_tree",
        "sub_traces",
    ):
        assert key in body
    zero = {"model_calls": 0, "tokens": 0, "cost": 0.0, "duration_ms": 0}
    common: dict[str, object] = {
        "summary": None,
        "criteria": [],
        "self_stats": zero,
        "cumulative_stats": zero,
    }
    assert body["goal_tree"] == {
        "focus": "g1",
        "goals": [
            {
                **common,
                "id": "root",  # the automatic root goal: the trace's task
                "title": "shape",
                "parent_id": None,
                "status": "pending",
                "type": "goal",
                "reason": "automatic root goal: the trace's task",
                "mode": None,
                "sub_trace_ids": [],
            },
            {
                **common,
                "id": "g1",
                "title": "find flights",
                "parent_id": None,
                "status": "in_progress",
                "type": "goal",
                "reason": None,
                "mode": None,
                "sub_trace_ids": [],
            },
            {
                **common,
                "id": "a1",  # the agent call's goal, under the goal in focus
                "title": "delegate: search",
                "parent_id": "g1",
                "status": "in_progress",
                "type": "agent_call",
                "reason": None,
                "mode": "delegate",
                "sub_trace_ids": ["t_child"],
            },
        ],
    }
    assert body["sub_traces"][0]["trace_id"] == "t_child"
    assert body["sub_traces"][0]["status"] == "running"
    assert set(body["totals"]) == {
        "prompt_tokens",
        "completion_tokens",
        "cache_read_tokens",
        "cache_write_tokens",
        "saved_tokens",
        "cost",
        "duration_ms",
    }


async def rewound_trace(client: httpx.AsyncClient, store: EventStore) -> str:
    """A trace answered once, then rewound to its first message with a second question."""
    trace_id = await create(client, "first question")
    await append_as_executor(
        store, trace_id, assistant(2, "first answer"), ev.Completed(summary="done")
    )
    response = await client.post(
        f"/api/traces/{trace_id}/run",
        json={"messages": [user_message("second question")], "after_sequence": 1},
    )
    assert response.status_code == 202 and response.json()["status"] == "running"
    return trace_id


async def test_rewind_moves_the_main_path_and_keeps_the_old_branch(
    client: httpx.AsyncClient, store: EventStore
) -> None:
    trace_id = await rewound_trace(client, store)
    main = (await client.get(f"/api/traces/{trace_id}/messages?mode=main_path")).json()
    assert [(m["sequence"], m["parent_sequence"]) for m in main["messages"]] == [(1, None), (3, 1)]
    assert main["head_sequence"] == 3
    everything = (await client.get(f"/api/traces/{trace_id}/messages?mode=all")).json()
    assert [m["content"] for m in everything["messages"]] == [
        "first question",
        "first answer",
        "second question",
    ]
    run = (await events_of(store, trace_id))[-1]
    assert isinstance(run, ev.RunRequested) and run.after_sequence == 1
    # a viewer that has messages up to 1 asks for the rest only, from every branch
    newer = (await client.get(f"/api/traces/{trace_id}/messages?mode=all&after=1")).json()
    assert [m["sequence"] for m in newer["messages"]] == [2, 3]
    assert newer["head_sequence"] == 3
    newest = (await client.get(f"/api/traces/{trace_id}/messages?after=2")).json()
    assert [m["sequence"] for m in newest["messages"]] == [3]


async def test_messages_come_in_pages_of_limit(
    client: httpx.AsyncClient, store: EventStore
) -> None:
    """A long trace is read page by page (issue 46): ``limit`` lowest sequences after
    ``after``, on the main path and over every branch; a limit out of range is refused."""
    trace_id = await rewound_trace(client, store)
    await append_as_executor(store, trace_id, assistant(4, "second answer"))
    pages: dict[str, list[list[int]]] = {}
    for mode in ("main_path", "all"):
        after, got = 0, []
        while True:
            url = f"/api/traces/{trace_id}/messages?mode={mode}&limit=2&after={after}"
            page = (await client.get(url)).json()
            got.append([m["sequence"] for m in page["messages"]])
            assert page["head_sequence"] == 4
            if len(page["messages"]) < 2:
                break
            after = page["messages"][-1]["sequence"]
        pages[mode] = got
    assert pages == {
        "main_path": [
            [1, 3],
            [4],
        ],
        "all": [[1, 2], [3, 4], []],
    }
    for bad in ("0", "10001", "x"):
        refused = await client.get(f"/api/traces/{trace_id}/messages?limit={bad}")
        assert refused.status_code == 422, bad


async def test_messages_page_back_from_the_end_with_before(
    client: httpx.AsyncClient, store: EventStore
) -> None:
    """A viewer opens a long trace at its end (issue 46): with ``before`` the page holds the
    ``limit`` highest sequences below it, lowest first; it pages back with ``before`` = the
    lowest it got until a page holds fewer. ``after`` and ``before`` bound a range."""
    trace_id = await rewound_trace(client, store)
    await append_as_executor(store, trace_id, assistant(4, "second answer"))
    pages: dict[str, list[list[int]]] = {}
    for mode in ("main_path", "all"):
        before, got = 2**53, []
        while True:
            url = f"/api/traces/{trace_id}/messages?mode={mode}&limit=2&before={before}"
            page = (await client.get(url)).json()
            got.append([m["sequence"] for m in page["messages"]])
            assert page["head_sequence"] == 4
            if len(page["messages"]) < 2:
                break
            before = page["messages"][0]["sequence"]
        pages[mode] = got
    assert pages == {"main_path": [[3, 4], [1]], "all": [[3, 4], [1, 2], []]}
    ranged = await client.get(f"/api/traces/{trace_id}/messages?mode=all&after=1&before=4")
    assert [m["sequence"] for m in ranged.json()["messages"]] == [2, 3]
    whole = await client.get(f"/api/traces/{trace_id}/messages?mode=main_path&before=4")
    assert [m["sequence"] for m in whole.json()["messages"]] == [1, 3]
    for bad in ("0", "-1", "x", str(2**63)):
        refused = await client.get(f"/api/traces/{trace_id}/messages?before={bad}")
        assert refused.status_code == 422, bad


async def test_continue_and_regenerate(client: httpx.AsyncClient, store: EventStore) -> None:
    trace_id = await create(client, "q")
    await append_as_executor(store, trace_id, assistant(2, "a"), ev.Completed())
    continued = await client.post(
        f"/api/traces/{trace_id}/run", json={"messages": [user_message("and then?")]}
    )
    assert continued.status_code == 202
    main = (await client.get(f"/api/traces/{trace_id}/messages")).json()["messages"]
    assert [m["content"] for m in main] == ["q", "a", "and then?"]
    await append_as_executor(store, trace_id, assistant(4, "then this"), ev.Completed())
    regenerate = await client.post(f"/api/traces/{trace_id}/run", json={"after_sequence": 3})
    assert regenerate.status_code == 202
    main = (await client.get(f"/api/traces/{trace_id}/messages")).json()["messages"]
    assert [m["sequence"] for m in main] == [1, 2, 3]


async def test_refused_requests_append_nothing(
    client: httpx.AsyncClient, store: EventStore
) -> None:
    trace_id = await create(client)
    before = await events_of(store, trace_id)
    running_run = await client.post(f"/api/traces/{trace_id}/run", json={"messages": []})
    assert running_run.status_code == 409
    reply = await client.post(f"/api/traces/{trace_id}/reply", json={"content": "hi"})
    assert reply.status_code == 409 and reply.json()["error"]["code"] == "conflict"
    await append_as_executor(store, trace_id, assistant(2, "a"), ev.Completed())
    before = await events_of(store, trace_id)
    cut = await client.post(f"/api/traces/{trace_id}/run", json={"after_sequence": 99})
    assert cut.status_code == 422 and cut.json()["error"]["code"] == "unknown_sequence"
    stop = await client.post(f"/api/traces/{trace_id}/stop")
    assert stop.status_code == 409
    assert await events_of(store, trace_id) == before


async def test_stop_then_resume(client: httpx.AsyncClient, store: EventStore) -> None:
    trace_id = await create(client)
    stop = await client.post(f"/api/traces/{trace_id}/stop")
    assert stop.status_code == 202
    assert isinstance((await events_of(store, trace_id))[-1], ev.StopRequested)
    await append_as_executor(store, trace_id, ev.Stopped(reason="user"))
    assert (await client.get(f"/api/traces/{trace_id}")).json()["status"] == "stopped"
    resume = await client.post(f"/api/traces/{trace_id}/resume")
    assert resume.status_code == 202 and resume.json()["status"] == "running"
    last = (await events_of(store, trace_id))[-1]
    assert isinstance(last, ev.RunRequested) and last.after_sequence is None


async def test_reply_to_a_waiting_trace(client: httpx.AsyncClient, store: EventStore) -> None:
    trace_id = await create(client)
    await append_as_executor(
        store, trace_id, ev.Waiting(reason="human", detail="which city?", tool_call_id="c1")
    )
    view = (await client.get(f"/api/traces/{trace_id}")).json()
    assert view["status"] == "waiting" and view["wait_reason"] == "human"
    reply = await client.post(f"/api/traces/{trace_id}/reply", json={"content": "Lyon"})
    assert reply.status_code == 202 and reply.json()["status"] == "running"
    last = (await events_of(store, trace_id))[-1]
    assert isinstance(last, ev.HumanReplied) and last.content == "Lyon"


async def test_reflect_and_compact(client: httpx.AsyncClient, store: EventStore) -> None:
    trace_id = await create(client)
    reflect = await client.post(f"/api/traces/{trace_id}/reflect", json={"focus": "costs"})
    assert reflect.status_code == 202
    bare = await client.post(f"/api/traces/{trace_id}/reflect")
    assert bare.status_code == 202
    compact = await client.post(f"/api/traces/{trace_id}/compact")
    assert compact.status_code == 202
    kinds = [(e.type, getattr(e, "focus", None)) for e in await events_of(store, trace_id)]
    assert kinds[1:] == [
        ("reflect_requested", "costs"),
        ("reflect_requested", None),
        ("compact_requested", None),
    ]


async def test_concurrent_requests_are_each_applied_once(
    client: httpx.AsyncClient, store: EventStore
) -> None:
    trace_id = await create(client)
    responses = await asyncio.gather(
        *(client.post(f"/api/traces/{trace_id}/stop") for _ in range(4))
    )
    assert [r.status_code for r in responses] == [202] * 4
    events = await events_of(store, trace_id)
    assert [e.type for e in events] == ["trace_created"] + ["stop_requested"] * 4
    assert [e.n for e in events] == list(range(1, 6))
    assert len({r.json()["event_id"] for r in responses}) == 4


async def test_listing_filters_and_pages(
    client: httpx.AsyncClient, store: EventStore, gateway: RunningGateway
) -> None:
    ids = [await create(client, f"q{i}") for i in range(5)]
    await append_as_executor(store, ids[0], assistant(2, "a"), ev.Completed())
    listed = (await client.get("/api/traces")).json()
    assert [t["trace_id"] for t in listed["traces"]] == ids[::-1]
    assert listed["next_cursor"] is None
    first = (await client.get("/api/traces?limit=2")).json()
    second = (await client.get(f"/api/traces?limit=2&cursor={first['next_cursor']}")).json()
    third = (await client.get(f"/api/traces?limit=2&cursor={second['next_cursor']}")).json()
    pages = [t["trace_id"] for page in (first, second, third) for t in page["traces"]]
    assert pages == ids[::-1] and third["next_cursor"] is None
    # Play the executor's part (it updates the index after a turn); the gateway learns of it
    # through its KV watch.
    await TraceIndex(store.conn).update(await trace_state(store, ids[0]))
    async with asyncio.timeout(10):
        await gateway.runtime.mirror.wait_until(
            lambda mirror: mirror.entries[ids[0]].status == "completed"
        )
    completed = (await client.get("/api/traces?status=completed")).json()["traces"]
    assert [t["trace_id"] for t in completed] == [ids[0]]
    running = (await client.get("/api/traces/running")).json()["traces"]
    assert {t["trace_id"] for t in running} == set(ids[1:])


async def test_listing_searches_names_case_insensitively(client: httpx.AsyncClient) -> None:
    alpha = await create(client, "Refactor the Parser")
    await create(client, "write docs")
    beta = await create(client, "parser benchmarks")
    found = (await client.get("/api/traces", params={"q": "PARSER"})).json()["traces"]
    assert [t["trace_id"] for t in found] == [beta, alpha]
    paged = (await client.get("/api/traces", params={"q": "parser", "limit": 1})).json()
    assert [t["trace_id"] for t in paged["traces"]] == [beta]
    rest = (
        await client.get("/api/traces", params={"q": "parser", "cursor": paged["next_cursor"]})
    ).json()
    assert [t["trace_id"] for t in rest["traces"]] == [alpha]
    none = (await client.get("/api/traces", params={"q": "nothing like it"})).json()
    assert none["traces"] == []


async def test_parent_filter_lists_sub_traces(
    client: httpx.AsyncClient, store: EventStore, gateway: RunningGateway
) -> None:
    parent = await create(client, "parent")
    child = "t_child" + parent[2:12]
    created = ev.TraceCreated(
        messages=[ev.InputMessage(role="user", content="sub")], parent_trace_id=parent
    )
    await store.append("trace", child, [created], expected=Position())
    await TraceIndex(store.conn).update(await trace_state(store, child))
    async with asyncio.timeout(10):
        await gateway.runtime.mirror.wait_until(lambda mirror: child in mirror.entries)
    listed = (await client.get(f"/api/traces?parent={parent}")).json()["traces"]
    assert [t["trace_id"] for t in listed] == [child]
    # The child records no owner: it is its parent's owner's, readable through the API.
    assert (await client.get(f"/api/traces/{child}")).status_code == 200


async def test_run_without_a_body_continues(client: httpx.AsyncClient, store: EventStore) -> None:
    trace_id = await create(client)
    await append_as_executor(store, trace_id, assistant(2, "a"), ev.Completed())
    response = await client.post(f"/api/traces/{trace_id}/run")
    assert response.status_code == 202 and response.json()["status"] == "running"
    last = (await events_of(store, trace_id))[-1]
    assert isinstance(last, ev.RunRequested) and last.after_sequence is None


async def test_model_params_are_recorded_and_a_run_can_change_them_and_the_model(
    client: httpx.AsyncClient, store: EventStore
) -> None:
    params = {
        "temperature": 0,
        "top_p": 0.5,
        "max_tokens": 32,
        "seed": 7,
        "stop": ["END"],
        "tool_choice": {"name": "goal"},
    }
    response = await client.post(
        "/api/traces",
        json={"messages": [user_message("q")], "model": "scripted:auto", "model_params": params},
    )
    assert response.status_code == 202, response.text
    trace_id = response.json()["trace_id"]
    [created] = await events_of(store, trace_id)
    assert isinstance(created, ev.TraceCreated)
    assert created.config.model_params == ev.ModelParams(
        temperature=0,
        top_p=0.5,
        max_tokens=32,
        seed=7,
        stop=["END"],
        tool_choice=ev.NamedTool(name="goal"),
    )
    await append_as_executor(store, trace_id, assistant(2, "a"), ev.Completed())
    moved = await client.post(
        f"/api/traces/{trace_id}/run",
        json={
            "messages": [user_message("more")],
            "model": "openai:gpt-4o-mini",
            "model_params": {"tool_choice": "required"},
        },
    )
    assert moved.status_code == 202, moved.text
    run = (await events_of(store, trace_id))[-1]
    assert isinstance(run, ev.RunRequested) and run.config is not None
    assert run.config.model == "openai:gpt-4o-mini"
    assert run.config.model_params == ev.ModelParams(tool_choice="required")
    # everything else the trace was created with is kept
    assert run.config.preset == created.config.preset


async def test_unknown_or_invalid_model_params_are_refused(
    client: httpx.AsyncClient, store: EventStore
) -> None:
    trace_id = await create(client, "q")
    before = len(await events_of(store, trace_id))
    for params in (
        {"temprature": 0},
        {"tool_choice": "any"},
        {"top_p": 2},
        {"tool_choice": {"name": "goal", "type": "function"}},
        {"max_tokens": 0},
    ):
        created = await client.post(
            "/api/traces", json={"messages": [user_message("hi")], "model_params": params}
        )
        assert created.status_code == 422, (params, created.text)
        run = await client.post(f"/api/traces/{trace_id}/run", json={"model_params": params})
        assert run.status_code == 422, (params, run.text)
    assert len(await events_of(store, trace_id)) == before
