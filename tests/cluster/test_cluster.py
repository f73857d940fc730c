"""A replicated JetStream cluster loses a node without losing a step.

Three nats-server processes from the wheel, clustered on loopback; the log provisioned with
three replicas; two executor processes and a planner connected through all three seed URLs.
Mid-run the stream's leader is killed with ``kill -9`` (and restarted), then another node;
every trace and the task must finish with no lost, duplicated or unpaired message and no step
run twice, the services reconnecting on their own. Leader elections surface to clients as
"no response from stream" and timeouts: those are retried in place, never counted as poison.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from pathlib import Path

import httpx
import pytest
from longhaul.core.config import NatsConfig
from longhaul.core.connection import connect
from longhaul.core.provision import ProvisionSettings
from longhaul.core.store import ConcurrencyError, EventStore, Position
from longhaul.domain import events as ev
from longhaul.domain.events import Aggregate

from tests.chaos.suite import Row, _check, render
from tests.integration.executor.scripts import record_steps
from tests.integration.gateway.harness import gateway_config, serve_gateway, user_message
from tests.integration.planner.support import create_task, phase, planner_service
from tests.support.folds import task_state, trace_state
from tests.support.nats import three_nodes, unique_namespace
from tests.support.stack import ExecutorProcess, create_trace, test_config

pytestmark = pytest.mark.cluster

TRACES = 20
STEPS = 6
FINISH_S = 150.0


async def wait_for_steps(log: Path, count: int, within: float = 90.0) -> None:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if len((await asyncio.to_thread(log.read_bytes)).splitlines()) >= count:
            return
        await asyncio.sleep(0.05)
    raise TimeoutError(f"fewer than {count} steps within {within:.0f} s")


async def stream_leader(store: EventStore) -> str:
    """The server name leading the event stream, once there is one."""
    async with asyncio.timeout(60):
        while True:
            with contextlib.suppress(Exception):
                info = await store.conn.js.stream_info(store.conn.names.stream)
                if info.cluster is not None and info.cluster.leader:
                    return str(info.cluster.leader)
            await asyncio.sleep(0.1)


async def test_killing_the_leader_and_another_node_loses_nothing(tmp_path: Path) -> None:
    with three_nodes(tmp_path) as nodes:
        root = tmp_path
        urls = ",".join(server.url for server in nodes)
        namespace = unique_namespace()
        nats = NatsConfig(url=urls, namespace=namespace, replicas=3)
        conn = await connect(nats, provision_settings=ProvisionSettings(replicas=3))
        store = EventStore(conn)
        steps_log = root / "steps.jsonl"
        steps_log.touch()
        (root / "verify.log").touch()  # no verification here: nothing may run twice
        env = {
            "LONGHAUL_NATS__URL": urls,
            "LONGHAUL_NATS__REPLICAS": "3",
            "LONGHAUL_EXECUTOR__TOOL_MODULES": "tests.integration.executor.tooling",
            "LONGHAUL_EXECUTOR__WORKING_ROOT": str(root / "work"),
            # Strict: two failed handlings make a poison event, so an election's errors would
            # fail traces if they counted.
            "LONGHAUL_EXECUTOR__POISON_ATTEMPTS": "2",
        }
        config = test_config(urls, namespace)
        config.nats = nats
        executors = [
            ExecutorProcess(urls, namespace, f"exec-c{i}", env=env, log_dir=root) for i in range(2)
        ]
        try:
            await asyncio.gather(*(e.start() for e in executors))
            async with planner_service(config):
                traces = [
                    await create_trace(
                        store,
                        f"trace {n}",
                        model=record_steps(root / f"t{n}.yaml", STEPS, steps_log, hold_ms=100),
                    )
                    for n in range(TRACES)
                ]
                phases = [
                    phase(
                        f"p{k}",
                        *([f"p{k - 1}"] if k else []),
                        model=record_steps(root / f"p{k}.yaml", 3, steps_log, hold_ms=100),
                    )
                    for k in range(2)
                ]
                task = await create_task(store, "clustered task", phases=phases)
                total = TRACES * STEPS + 2 * 3

                await wait_for_steps(steps_log, total // 4)
                leader = await stream_leader(store)
                victim = next(s for s in nodes if s.cluster and s.cluster.name == leader)
                victim.kill()  # kill -9 of the stream's leader
                await wait_for_steps(steps_log, total // 2)
                victim.start()
                # Once it has caught up: killing another node before would take the quorum
                # for as long as the restart takes, which a loaded box stretches past bounds.
                await all_replicas_current(store)
                other = next(s for s in nodes if s is not victim)
                other.kill()  # then another node
                await wait_for_steps(steps_log, 3 * total // 4)
                other.start()

                row = Row("cluster")
                deadline = time.monotonic() + FINISH_S
                pending: set[tuple[Aggregate, str]] = {("trace", t) for t in traces}
                pending.add(("task", task))
                while pending and time.monotonic() < deadline:
                    for kind, aggregate_id in list(pending):
                        with contextlib.suppress(Exception):  # a node may still be electing
                            state = await (
                                trace_state(store, aggregate_id)
                                if kind == "trace"
                                else task_state(store, aggregate_id)
                            )
                            if state.is_final:
                                pending.discard((kind, aggregate_id))
                    await asyncio.sleep(0.2)
                await _check(row, store, traces, [task], steps_log, root / "verify.log")
                for kind, aggregate_id in sorted(pending):
                    row.notes.append(await explain(store, kind, aggregate_id, root))
        finally:
            await asyncio.gather(*(e.__aexit__(None, None, None) for e in executors))
            await conn.close()
    print(render([row], "cluster: leader and another node killed"))
    print("\n".join(row.notes))  # whole: the table shows only the first notes
    assert row.aggregates == TRACES + 1, render([row], "cluster")
    assert row.clean and row.finished == row.aggregates, render([row], "cluster")


async def explain(store: EventStore, kind: Aggregate, aggregate_id: str, logs: Path) -> str:
    """What a stuck aggregate looks like from every side: its last events, its index entry,
    its lease, and what the executors logged about it (the failure message is all CI keeps)."""
    names = store.conn.names
    lines = [f"{kind} {aggregate_id} unfinished:"]
    with contextlib.suppress(Exception):
        tail = [r.event.type async for r in store.replay(kind, aggregate_id)][-6:]
        lines.append(f"  last events: {tail}")
    if kind == "task":  # a task waits on its step traces: show where each one stands
        with contextlib.suppress(Exception):
            task = await task_state(store, aggregate_id)
            for phase_id, phase_state in task.phases.items():
                for trace_id in phase_state.trace_ids:
                    step = [r.event.type async for r in store.replay("trace", trace_id)][-4:]
                    lines.append(f"  phase {phase_id} step {trace_id}: {step}")
    for bucket, key in ((names.traces, aggregate_id), (names.leases, f"trace.{aggregate_id}")):
        try:
            entry = await (await store.conn.kv(bucket)).get(key)
            lines.append(f"  {bucket}: {entry.value!r} (revision {entry.revision})")
        except Exception as exc:
            lines.append(f"  {bucket}: {type(exc).__name__}")
    for log_file in await asyncio.to_thread(lambda: sorted(logs.glob("exec-*.log"))):
        text = await asyncio.to_thread(log_file.read_text)
        mentions = [line for line in text.splitlines() if aggregate_id in line]
        lines += [f"  {log_file.name}: {line[:300]}" for line in mentions[-8:]]
    return "\n".join(lines)


KILLS = 3
CREATES_PER_KILL = 12


async def all_replicas_current(store: EventStore) -> None:
    """A restarted node has caught up: killing another before would take the quorum."""
    async with asyncio.timeout(90):
        while True:
            with contextlib.suppress(Exception):
                info = await store.conn.js.stream_info(store.conn.names.stream)
                replicas = info.cluster.replicas if info.cluster else None
                if replicas and len(replicas) == 2 and all(r.current for r in replicas):
                    return
            await asyncio.sleep(0.2)


async def test_node_kills_during_creation_answer_no_5xx(tmp_path: Path) -> None:
    """Traces created through the gateway while the stream's leader (then the new one, and
    again) is killed with ``kill -9``: the gateway waits out each election and retries with
    the same message id, so no request answers 5xx and every accepted trace is on the log
    exactly once."""
    with three_nodes(tmp_path) as nodes:
        urls = ",".join(server.url for server in nodes)
        nats = NatsConfig(url=urls, namespace=unique_namespace(), replicas=3)
        conn = await connect(nats, provision_settings=ProvisionSettings(replicas=3))
        store = EventStore(conn)
        statuses: list[int] = []
        accepted: list[str] = []

        async def create(http: httpx.AsyncClient, n: int) -> None:
            response = await http.post(
                "/api/traces",
                json={"messages": [user_message(f"created during a kill {n}")]},
                headers={"Idempotency-Key": f"kill-test-{n}"},
            )
            statuses.append(response.status_code)
            if response.status_code == 202:
                accepted.append(response.json()["trace_id"])

        try:
            async with (
                serve_gateway(gateway_config(nats)) as gateway,
                gateway.client(timeout=90) as http,
            ):
                for kill in range(KILLS):
                    leader = await stream_leader(store)
                    victim = next(s for s in nodes if s.cluster and s.cluster.name == leader)
                    first = kill * CREATES_PER_KILL
                    creating = [
                        asyncio.create_task(create(http, first + n))
                        for n in range(CREATES_PER_KILL)
                    ]
                    victim.kill()
                    await asyncio.gather(*creating)
                    victim.start()
                    await all_replicas_current(store)
            counts = {
                trace_id: len([r async for r in store.replay("trace", trace_id)])
                for trace_id in accepted
            }
        finally:
            await conn.close()
    failures = [status for status in statuses if status >= 500]
    assert not failures, f"{len(failures)} of {len(statuses)} answered 5xx: {statuses}"
    assert len(statuses) == KILLS * CREATES_PER_KILL
    assert len(set(accepted)) == len(accepted) == statuses.count(202)
    assert all(count == 1 for count in counts.values()), counts


async def test_a_replicated_stream_commits_a_steps_events_as_one_batch_by_default(
    tmp_path: Path,
) -> None:
    """``nats.atomic_batches: auto`` (the default) on three replicas: several events of one
    save are one atomic batch (the headers of a batch on each, the commit on the last)."""
    with three_nodes(tmp_path) as nodes:
        urls = ",".join(server.url for server in nodes)
        nats = NatsConfig(url=urls, namespace=unique_namespace(), replicas=3)
        assert nats.atomic_batches == "auto"
        conn = await connect(nats, provision_settings=ProvisionSettings(replicas=3))
        try:
            store = EventStore(conn)
            assert store.atomic
            trace_id = "t_batched"
            created = ev.TraceCreated(messages=[ev.InputMessage(role="user", content="hi")])
            [first] = await store.append("trace", trace_id, [created], expected=Position())
            stored = await store.append(
                "trace",
                trace_id,
                [
                    ev.MessageAppended(sequence=n, parent_sequence=n - 1, role="assistant")
                    for n in (2, 3)
                ],
                expected=Position(first.seq, 1),
            )
            headers = [
                (await conn.js.get_msg(conn.names.stream, r.seq)).headers or {} for r in stored
            ]
            assert [h.get("Nats-Batch-Sequence") for h in headers] == ["1", "2"]
            assert headers[-1].get("Nats-Batch-Commit") == "1"
        finally:
            await conn.close()


async def test_an_append_racing_another_writer_on_a_replicated_stream_is_a_conflict(
    tmp_path: Path,
) -> None:
    """On a clustered stream nats-server refuses an expected-sequence check on a subject whose
    last write is still being proposed with a bare "wrong last sequence" (10164), not the
    numbered one (10071). It is the same question — did someone else write here? — and gets
    the same answer: the log decides, a lost race is a :class:`ConcurrencyError`."""
    with three_nodes(tmp_path) as nodes:
        urls = ",".join(server.url for server in nodes)
        nats = NatsConfig(url=urls, namespace=unique_namespace(), replicas=3, atomic_batches=False)
        conn = await connect(nats, provision_settings=ProvisionSettings(replicas=3))
        try:
            store = EventStore(conn)
            created = ev.TraceCreated(messages=[ev.InputMessage(role="user", content="hi")])
            outcomes: list[str] = []
            for n in range(20):
                trace_id = f"t_race{n}"
                [first] = await store.append("trace", trace_id, [created], expected=Position())
                other = ev.MessageAppended(
                    aggregate_id=trace_id,
                    n=2,
                    sequence=2,
                    parent_sequence=1,
                    role="assistant",
                    content="other writer",
                )
                # The other writer's event is still being proposed when ours is checked.
                await conn.nc.publish(
                    conn.names.subject("trace", trace_id, other.type),
                    ev.encode(other),
                    headers={
                        "Nats-Msg-Id": f"{trace_id}:other",
                        "Nats-Expected-Last-Subject-Sequence": str(first.seq),
                        "Nats-Expected-Last-Subject-Sequence-Subject": conn.names.aggregate_filter(
                            "trace", trace_id
                        ),
                    },
                )
                ours = ev.MessageAppended(
                    sequence=2, parent_sequence=1, role="assistant", content="ours"
                )
                try:
                    await store.append("trace", trace_id, [ours], expected=Position(first.seq, 1))
                    outcomes.append("stored")
                except ConcurrencyError:
                    outcomes.append("conflict")
                stored = [r.event async for r in store.replay("trace", trace_id)]
                assert [getattr(e, "content", None) for e in stored] == [None, "other writer"]
            assert outcomes == ["conflict"] * 20, outcomes
        finally:
            await conn.close()
