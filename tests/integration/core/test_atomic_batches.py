"""Atomic batches on a real nats-server, and the way back without them: a stream an older
build created (no ``allow_atomic``) keeps working, its events appended one by one and said
so at connect, until a start that provisions upgrades it in place."""

from __future__ import annotations

import asyncio
import logging

import pytest
from longhaul.core.config import NatsConfig
from longhaul.core.connection import connect
from longhaul.core.provision import ProvisionSettings, event_stream_config
from longhaul.core.repository import traces
from longhaul.core.store import ConcurrencyError, EventStore, Position
from longhaul.domain import events as ev
from longhaul.domain.ids import new_id
from longhaul.domain.names import Names

CREATED = ev.TraceCreated(messages=[ev.InputMessage(role="user", content="hi")])


def message(sequence: int, text: str) -> ev.MessageAppended:
    return ev.MessageAppended(
        sequence=sequence, parent_sequence=sequence - 1, role="assistant", content=text
    )


def atomic(config: NatsConfig) -> NatsConfig:
    return config.model_copy(update={"atomic_batches": True})


async def test_a_batch_is_one_commit_on_the_stream(nats_config: NatsConfig) -> None:
    """The events of a batch reach the stream as one atomic batch: a reader sees them carry
    the batch's headers, the last its commit."""
    conn = await connect(atomic(nats_config), provision_settings=ProvisionSettings())
    try:
        store = EventStore(conn)
        assert store.atomic
        trace_id = new_id("t")
        [first] = await store.append("trace", trace_id, [CREATED], expected=Position())
        stored = await store.append(
            "trace", trace_id, [message(2, "a"), message(3, "b")], expected=Position(first.seq, 1)
        )
        headers = [(await conn.js.get_msg(conn.names.stream, r.seq)).headers or {} for r in stored]
        assert [h.get("Nats-Batch-Sequence") for h in headers] == ["1", "2"]
        assert len({h.get("Nats-Batch-Id") for h in headers}) == 1
        assert headers[-1].get("Nats-Batch-Commit") == "1"
        assert [h.get("Nats-Msg-Id") for h in headers] == [f"{trace_id}:2", f"{trace_id}:3"]
    finally:
        await conn.close()


async def test_by_default_one_replica_appends_one_by_one_and_says_why(
    nats_config: NatsConfig, caplog: pytest.LogCaptureFixture
) -> None:
    """``auto``: a one-replica stream allows atomic batches, but nats-server stages each one
    in a new on-disk store, so a step's events go one by one there."""
    assert nats_config.atomic_batches == "auto"
    with caplog.at_level(logging.INFO, logger="longhaul.core.provision"):
        conn = await connect(nats_config, provision_settings=ProvisionSettings())
    try:
        info = await conn.js.stream_info(conn.names.stream)
        assert info.config.allow_atomic and info.config.num_replicas == 1
        store = EventStore(conn)
        assert not store.atomic
        assert "has one replica: a step's events are appended one by one" in caplog.text
        trace_id = new_id("t")
        [first] = await store.append("trace", trace_id, [CREATED], expected=Position())
        stored = await store.append(
            "trace", trace_id, [message(2, "a"), message(3, "b")], expected=Position(first.seq, 1)
        )
        headers = [(await conn.js.get_msg(conn.names.stream, r.seq)).headers or {} for r in stored]
        assert not any("Nats-Batch-Id" in h for h in headers)
    finally:
        await conn.close()


@pytest.mark.parametrize(
    ("given", "mode"), [("auto", "auto"), ("true", True), ("false", False), ("1", True)]
)
def test_the_setting_reads_auto_or_a_boolean(given: str, mode: object) -> None:
    assert NatsConfig.model_validate({"atomic_batches": given}).atomic_batches == mode


def test_the_setting_refuses_anything_else() -> None:
    with pytest.raises(ValueError, match="atomic_batches"):
        NatsConfig.model_validate({"atomic_batches": "sometimes"})


async def test_a_stream_an_older_build_created_appends_one_by_one_until_upgraded_in_place(
    nats_config: NatsConfig, caplog: pytest.LogCaptureFixture
) -> None:
    plain = await connect(nats_config)  # no provisioning: the stream is the older build's
    names = Names(nats_config.namespace)
    older = event_stream_config(names, ProvisionSettings(), atomic=False)
    await plain.js.add_stream(older)
    await plain.close()

    with caplog.at_level(logging.WARNING, logger="longhaul.core.provision"):
        conn = await connect(atomic(nats_config))
    assert "created without allow_atomic" in caplog.text  # said at start
    try:
        store = EventStore(conn)
        assert not store.atomic
        trace_id = new_id("t")
        repository = traces(store)
        state = await repository.create(trace_id, CREATED, actor="test")
        assert state is not None
        written = await repository.save(
            trace_id, state, lambda s: [message(2, "a"), message(3, "b")], actor="x"
        )
        assert [r.event.n for r in written] == [2, 3]
        # one by one: another writer between the two, and the refusal names what landed
        in_flight = await store.begin_append(
            "trace",
            trace_id,
            [message(4, "c"), message(5, "d")],
            expected=Position(written[-1].seq, 3),
        )
        watch = store.watch("trace", trace_id, after=written[-1].seq)
        async with asyncio.timeout(10):
            landed = await anext(watch)  # the first is in, the second not sent yet
        await watch.aclose()
        after_first = Position(landed.seq, landed.event.n)
        await store.append("trace", trace_id, [message(5, "theirs")], expected=after_first)
        with pytest.raises(ConcurrencyError) as refused:
            await in_flight.settle()
        assert [r.event.n for r in refused.value.recorded] == [4]
    finally:
        await conn.close()

    upgraded = await connect(atomic(nats_config), provision_settings=ProvisionSettings())
    try:
        info = await upgraded.js.stream_info(names.stream)
        assert info.config.allow_atomic
        store = EventStore(upgraded)
        assert store.atomic
        state = await traces(store).load(trace_id)
        assert [m.content for m in state.main_path()] == ["hi", "a", "b", "c", "theirs"]
        stored = await store.append(
            "trace",
            trace_id,
            [message(6, "e"), message(7, "f")],
            expected=Position(state.stream_seq, state.version),
        )
        assert [r.event.n for r in stored] == [6, 7]
    finally:
        await upgraded.close()


async def test_a_stream_that_loses_the_setting_goes_on_one_by_one(
    nats_config: NatsConfig, caplog: pytest.LogCaptureFixture
) -> None:
    """The stream recreated or updated without ``allow_atomic`` while a service runs (an
    older build provisioning it): the refused batch (10174) is appended one by one, and so
    is everything after, said once."""
    conn = await connect(atomic(nats_config), provision_settings=ProvisionSettings())
    try:
        store = EventStore(conn)
        assert store.atomic
        trace_id = new_id("t")
        [first] = await store.append("trace", trace_id, [CREATED], expected=Position())
        config = (await conn.js.stream_info(conn.names.stream)).config
        config.allow_atomic = False
        await conn.js.update_stream(config)
        with caplog.at_level(logging.WARNING, logger="longhaul.core.store"):
            stored = await store.append(
                "trace",
                trace_id,
                [message(2, "a"), message(3, "b")],
                expected=Position(first.seq, 1),
            )
        assert [r.event.n for r in stored] == [2, 3] and not store.atomic
        assert "refused an atomic batch" in caplog.text
        replayed = [r async for r in store.replay("trace", trace_id)]
        assert replayed == [first, *stored]
    finally:
        await conn.close()
