"""The verifier's decisions over the in-memory store: answer an awaited request once, with
the fold's check, and stay silent for requests that were settled or superseded."""

from __future__ import annotations

import json
from typing import Any

from longhaul.core.config import LonghaulConfig
from longhaul.core.consumer import Delivery
from longhaul.core.memory import MemoryStore
from longhaul.core.repository import traces
from longhaul.core.store import Position, Recorded
from longhaul.domain import events as ev
from longhaul.llm.registry import ModelRegistry
from longhaul.verifier.handler import Verifier

from tests.support.counting_server import counting_server
from tests.support.folds import trace_state

SCHEMA = {"json_schema": {"type": "object", "required": ["ok"]}}


async def requested(
    store: MemoryStore, answer: str, trace_id: str = "t_1", verification: dict[str, Any] = SCHEMA
) -> Recorded:
    """A trace whose answer (message 2) awaits verification attempt 1; returns the request."""
    recorded = await store.append(
        "trace",
        trace_id,
        [
            ev.TraceCreated(
                messages=[ev.InputMessage(role="user", content="do it")],
                config=ev.TraceConfig(verification=verification),
            ),
            ev.MessageAppended(sequence=2, parent_sequence=1, role="assistant", content=answer),
            ev.VerificationRequested(attempt=1, answer_sequence=2),
        ],
        expected=Position(),
    )
    return recorded[-1]


def delivery(request: Recorded) -> Delivery:
    return Delivery(
        aggregate="trace",
        aggregate_id=request.event.aggregate_id,
        event_type=request.event.type,
        stream_seq=request.seq,
        num_delivered=1,
        data=ev.encode(request.event),
    )


def verifier(store: MemoryStore) -> Verifier:
    config = LonghaulConfig()
    return Verifier(traces(store), ModelRegistry(config.models), config)


async def verdicts(store: MemoryStore) -> list[ev.Event]:
    return [
        r.event
        async for r in store.replay("trace", "t_1")
        if isinstance(r.event, ev.VerificationPassed | ev.VerificationFailed)
    ]


async def test_an_awaited_request_is_answered_once() -> None:
    store = MemoryStore()
    request = await requested(store, '{"ok": true}')
    handler = verifier(store)
    await handler.handle(delivery(request))
    await handler.handle(delivery(request))  # redelivered: already settled
    [answer] = await verdicts(store)
    assert isinstance(answer, ev.VerificationPassed) and answer.attempt == 1
    assert answer.causation_id == request.event.id and answer.actor == "verifier"
    assert (await trace_state(store, "t_1")).status == "running"


async def test_a_failing_answer_gets_the_schema_errors() -> None:
    store = MemoryStore()
    request = await requested(store, '{"nope": 1}')
    await verifier(store).handle(delivery(request))
    [answer] = await verdicts(store)
    assert isinstance(answer, ev.VerificationFailed) and "ok" in " ".join(answer.errors)


async def test_a_stop_that_lands_while_checking_drops_the_verdict() -> None:
    store = MemoryStore()
    request = await requested(store, '{"ok": true}')
    # the trace is stopped between the verifier's read and its append
    store.interleave("trace", "t_1", ev.Stopped(reason="user"))
    await verifier(store).handle(delivery(request))
    assert await verdicts(store) == []
    assert (await trace_state(store, "t_1")).status == "stopped"


async def test_a_superseded_request_is_not_answered() -> None:
    store = MemoryStore()
    request = await requested(store, '{"ok": true}')
    state = await trace_state(store, "t_1")
    await store.append(
        "trace",
        "t_1",
        [
            ev.VerificationFailed(attempt=1, errors=["judged elsewhere"]),
            ev.MessageAppended(sequence=3, parent_sequence=2, role="user", content="again"),
            ev.MessageAppended(sequence=4, parent_sequence=3, role="assistant", content='{"ok":1}'),
            ev.VerificationRequested(attempt=2, answer_sequence=4),
        ],
        expected=Position(state.stream_seq, state.version),
    )
    await verifier(store).handle(delivery(request))
    assert len(await verdicts(store)) == 1


async def test_a_schema_naming_a_url_fails_at_once_and_fetches_nothing() -> None:
    """A client's schema with a remote ``$ref`` (the gateway refuses it; this one reached the
    log another way): one clear verdict, nothing fetched, nothing retried or waited on."""
    with counting_server() as (url, hits):
        hostile = {"json_schema": {"$ref": f"{url}/secrets.json"}}
        store = MemoryStore()
        request = await requested(store, '{"ok": true}', verification=hostile)
        await verifier(store).handle(delivery(request))
        [answer] = await verdicts(store)
    assert isinstance(answer, ev.VerificationFailed)
    assert "points outside the schema" in " ".join(answer.errors)
    assert hits == []


async def test_a_backtracking_pattern_is_matched_in_linear_time() -> None:
    """``(a+)+$`` against forty a's and a '!' takes Python's ``re`` hours; the verdict comes."""
    hostile = {"json_schema": {"type": "string", "pattern": "(a+)+$"}}
    store = MemoryStore()
    request = await requested(store, json.dumps("a" * 40 + "!"), verification=hostile)
    await verifier(store).handle(delivery(request))
    [answer] = await verdicts(store)
    assert isinstance(answer, ev.VerificationFailed) and "does not match" in answer.errors[0]
