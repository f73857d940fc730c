"""Bad input never stops the planner: garbage payloads, unparseable task logs and traces
that belong to no task are acknowledged and the next task is served."""

from __future__ import annotations

from longhaul.core.connection import Connection
from longhaul.core.store import EventStore, Position
from longhaul.domain import events as ev
from longhaul.domain.ids import new_id

from tests.integration.planner.conftest import ConfigFactory
from tests.integration.planner.support import (
    StepCompleter,
    create_task,
    phase,
    planner_service,
    wait_task,
)


async def test_poison_events_do_not_stop_the_planner(
    conn: Connection, store: EventStore, make_config: ConfigFactory
) -> None:
    names = conn.names
    await conn.js.publish(names.subject("task", "task_garbage", "task_created"), b"{nope")
    await conn.js.publish(names.subject("trace", "t_garbage", "completed"), b"\x00\x01")
    # A task whose log cannot be folded: a phase event before any plan.
    broken = new_id("task")
    await store.append("task", broken, [ev.TaskCreated(goal="g")], expected=Position())
    await conn.js.publish(
        names.subject("task", broken, "phase_completed"),
        ev.encode(ev.PhaseCompleted(phase_id="x", aggregate_id=broken, n=2)),
    )
    await conn.js.publish(
        names.subject("task", broken, "resume_requested"),
        ev.encode(ev.ResumeRequested(aggregate_id=broken, n=3)),
    )
    # A finished trace that runs no phase.
    lone = new_id("t")
    await store.append(
        "trace",
        lone,
        [
            ev.TraceCreated(messages=[ev.InputMessage(role="user", content="hi")]),
            ev.Completed(summary="done"),
        ],
        expected=Position(),
    )
    async with StepCompleter(conn, store), planner_service(make_config()):
        task_id = await create_task(store, phases=[phase("a"), phase("b", "a")])
        task = await wait_task(store, task_id)
    assert task.status == "completed"
    assert len([r async for r in store.replay("trace", lone)]) == 2  # untouched
