"""Fixtures for verifier tests: a trace waiting for verification and an in-process verifier
consumer (the real handler on the real durable), stopped cleanly after the test."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from longhaul.core.config import LonghaulConfig, NatsConfig
from longhaul.core.connection import Connection
from longhaul.core.consumer import ConsumerSpec, consume
from longhaul.core.repository import traces
from longhaul.core.store import EventStore, Position
from longhaul.domain import events as ev
from longhaul.domain.config import ModelsConfig, VerifierCommand, VerifierConfig
from longhaul.domain.ids import new_id
from longhaul.llm.registry import ModelRegistry
from longhaul.verifier.handler import Verifier
from longhaul.verifier.ledger import VerdictLedger

VERDICTS = (ev.VerificationPassed, ev.VerificationFailed)


async def waiting_trace(
    store: EventStore,
    answer: str,
    verification: dict[str, Any] | None = None,
    *,
    method: dict[str, Any] | None = None,
    working_dir: str | None = None,
    task: str = "do the thing",
    owner: str | None = None,
    trace_id: str | None = None,
) -> str:
    """A trace whose answer (message 2) awaits verification attempt 1."""
    trace_id = trace_id or new_id("t")
    await store.append(
        "trace",
        trace_id,
        [
            ev.TraceCreated(
                messages=[ev.InputMessage(role="user", content=task)],
                config=ev.TraceConfig(verification=verification, working_dir=working_dir),
                owner=owner,
            ),
            ev.MessageAppended(sequence=2, parent_sequence=1, role="assistant", content=answer),
            ev.VerificationRequested(attempt=1, answer_sequence=2, method=method),
        ],
        expected=Position(),
    )
    return trace_id


async def verdict(store: EventStore, trace_id: str, within_s: float = 20) -> ev.Event:
    """The first verification answer on the trace's log (waits for it)."""

    async def first() -> ev.Event:
        async for recorded in store.watch("trace", trace_id):
            if isinstance(recorded.event, VERDICTS):
                return recorded.event
        raise AssertionError("watch ended")

    return await asyncio.wait_for(first(), within_s)


async def verdicts(store: EventStore, trace_id: str) -> list[ev.Event]:
    return [r.event async for r in store.replay("trace", trace_id) if isinstance(r.event, VERDICTS)]


@pytest.fixture
def verifier_config(nats_config: NatsConfig, tmp_path: Path) -> LonghaulConfig:
    return LonghaulConfig(
        nats=nats_config,
        models=ModelsConfig(default="scripted:auto"),
        verifier=VerifierConfig(),
        data_dir=tmp_path / "data",
        working_root=tmp_path / "work",
    )


def unowned_home(config: LonghaulConfig, trace_id: str) -> Path:
    """Where an ownerless trace works (and its check runs), made."""
    assert config.working_root is not None
    home = config.working_root / "unowned" / trace_id
    home.mkdir(parents=True, exist_ok=True)
    return home


Checks = Callable[..., dict[str, Any]]


@pytest.fixture
def checks(verifier_config: LonghaulConfig) -> Checks:
    """``checks(command, **fields)`` configures an operator command check (in
    ``verifier.commands`` of ``verifier_config`` and every copy of it) and returns the
    verification config a trace names it by: ``{"check": "<name>"}``."""
    commands = verifier_config.verifier.commands

    def register(command: str | list[str], **fields: Any) -> dict[str, Any]:
        name = f"check{len(commands) + 1}"
        commands[name] = VerifierCommand(command=command, **fields)
        return {"check": name}

    return register


@pytest.fixture
async def make_verifier(
    store: EventStore, verifier_config: LonghaulConfig
) -> AsyncIterator[Callable[..., Verifier]]:
    registries: list[ModelRegistry] = []

    def factory(config: LonghaulConfig | None = None) -> Verifier:
        config = config or verifier_config
        registry = ModelRegistry(config.models)
        registries.append(registry)
        return Verifier(
            traces(store),
            registry,
            config,
            VerdictLedger(store.conn, ttl_s=config.store.lease_ttl_s),
        )

    yield factory
    for registry in registries:
        await registry.aclose()


@pytest.fixture
async def run_verifier(
    conn: Connection, make_verifier: Callable[..., Verifier]
) -> AsyncIterator[Callable[..., Awaitable[None]]]:
    """Start verifier replicas on the shared durable; all are stopped at teardown."""
    shutdown = asyncio.Event()
    tasks: list[asyncio.Task[None]] = []

    async def start(config: LonghaulConfig | None = None) -> None:
        spec = ConsumerSpec(
            durable="verifier",
            subjects=[conn.names.type_filter("trace", "verification_requested")],
            fetch_timeout_s=0.5,
            retry_delay_s=0.1,
        )
        verifier = make_verifier(config)
        tasks.append(asyncio.create_task(consume(conn, spec, verifier.handle, shutdown)))

    yield start
    shutdown.set()
    await asyncio.wait_for(asyncio.gather(*tasks), timeout=10)
