"""The gateway's write decisions over the in-memory store: a request becomes one event only if
the fold accepts it, is re-decided after a lost race, and a race that never settles is a 409
the client may retry. Routes, auth and the HTTP edges stay in tests/integration/gateway/."""

from __future__ import annotations

from typing import cast

import pytest
from longhaul.core.config import LonghaulConfig
from longhaul.core.connection import Connection
from longhaul.core.memory import MemoryStore
from longhaul.core.repository import tasks, traces
from longhaul.core.service import ServiceContext
from longhaul.core.store import Position
from longhaul.domain import events as ev
from longhaul.domain.state import TraceState
from longhaul.gateway import commands
from longhaul.gateway.auth import Principal
from longhaul.gateway.errors import ApiError
from longhaul.gateway.runtime import Runtime

from tests.support.folds import trace_state
from tests.support.runtime import offline_runtime

ALICE = Principal(owner="alice")


def runtime(store: MemoryStore) -> Runtime:
    config = LonghaulConfig()
    rt = offline_runtime(config)
    # The commands only use the repositories; a path that reached NATS would fail on the None.
    rt.ctx = ServiceContext(name="gateway", config=config, conn=cast(Connection, None))
    rt.ctx.traces = traces(store)
    rt.ctx.tasks = tasks(store)
    return rt


async def waiting_for_human(store: MemoryStore, owner: str = "alice") -> None:
    await store.append(
        "trace",
        "t_1",
        [
            ev.TraceCreated(messages=[ev.InputMessage(role="user", content="hi")], owner=owner),
            ev.Waiting(reason="human", detail="which file?"),
        ],
        expected=Position(),
    )


def reply(state: TraceState) -> ev.TraceEvent:
    return ev.HumanReplied(content=f"reply to {state.wait_detail}")


async def test_a_request_the_fold_accepts_is_appended_and_applied() -> None:
    store = MemoryStore()
    await waiting_for_human(store)
    state, recorded = await commands.append_to_trace(runtime(store), ALICE, "t_1", reply)
    assert isinstance(recorded.event, ev.HumanReplied) and recorded.event.actor == "gateway"
    assert recorded.event.content == "reply to which file?"
    assert state.status == "running" and state.version == 3


async def test_a_request_the_fold_refuses_is_a_409_and_nothing_is_written() -> None:
    store = MemoryStore()
    await waiting_for_human(store)
    rt = runtime(store)
    await commands.append_to_trace(rt, ALICE, "t_1", reply)
    with pytest.raises(ApiError) as refused:
        await commands.append_to_trace(rt, ALICE, "t_1", reply)  # not waiting any more
    assert refused.value.status == 409 and store.appends == 3


async def test_another_owners_trace_is_not_found() -> None:
    store = MemoryStore()
    await waiting_for_human(store, owner="bob")
    with pytest.raises(ApiError) as hidden:
        await commands.append_to_trace(runtime(store), ALICE, "t_1", reply)
    assert hidden.value.status == 404 and store.appends == 2


async def test_a_lost_race_is_decided_again_on_the_new_state() -> None:
    store = MemoryStore()
    await waiting_for_human(store)
    store.interleave("trace", "t_1", ev.StopRequested(reason="user"))
    rt = runtime(store)
    state, recorded = await commands.append_to_trace(rt, ALICE, "t_1", reply)
    assert recorded.event.n == 4 and state.stop_requested and state.status == "running"
    assert store.conflicts == 1


async def test_a_race_that_never_settles_is_a_retryable_409() -> None:
    store = MemoryStore()
    await waiting_for_human(store)

    def always_beaten(state: TraceState) -> ev.TraceEvent:
        store.interleave("trace", "t_1", ev.LoopWarned(tool="x", message="busy"))
        return ev.StopRequested(reason="user")

    with pytest.raises(ApiError) as exhausted:
        await commands.append_to_trace(runtime(store), ALICE, "t_1", always_beaten)
    assert exhausted.value.status == 409 and exhausted.value.code == "concurrent_update"
    assert not (await trace_state(store, "t_1")).stop_requested
