"""``Idempotency-Key`` on ``POST /api/traces`` against the real gateway and nats-server: a
repeat answers the first 202 body and starts nothing (the key's list holds one trace), also
when the two requests race; the same key under another API key starts that key's own trace
and never answers with the first key's; a key that is no header token is refused (422)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import httpx
import pytest
from longhaul.core.config import NatsConfig

from tests.integration.gateway.harness import (
    RunningGateway,
    gateway_config,
    serve_gateway,
    user_message,
)

KEY_A, KEY_B = "key-a-idem-0123456789", "key-b-idem-9876543210"
BODY = {"messages": [user_message("hello")], "model": "scripted:auto"}


@pytest.fixture
async def gateway(nats_config: NatsConfig) -> AsyncIterator[RunningGateway]:
    async with serve_gateway(gateway_config(nats_config, api_keys=f"{KEY_A},{KEY_B}")) as gw:
        yield gw


async def ids(client: httpx.AsyncClient) -> list[str]:
    listing = await client.get("/api/traces")
    assert listing.status_code == 200
    return [t["trace_id"] for t in listing.json()["traces"]]


async def test_a_repeated_key_answers_the_first_trace_and_starts_nothing(
    gateway: RunningGateway,
) -> None:
    async with gateway.client(KEY_A) as alice:
        headers = {"Idempotency-Key": "parent-1:call-1"}
        first = await alice.post("/api/traces", json=BODY, headers=headers)
        second = await alice.post("/api/traces", json=BODY, headers=headers)
        assert first.status_code == second.status_code == 202
        assert second.json() == first.json()
        assert second.headers["Location"] == first.headers["Location"]
        other = await alice.post("/api/traces", json=BODY, headers={"Idempotency-Key": "k2"})
        plain = await alice.post("/api/traces", json=BODY)
        assert other.json()["trace_id"] != first.json()["trace_id"]
        assert sorted(await ids(alice)) == sorted(
            r.json()["trace_id"] for r in (first, other, plain)
        )


async def test_racing_repeats_start_one_trace(gateway: RunningGateway) -> None:
    async with gateway.client(KEY_A) as alice:
        headers = {"Idempotency-Key": "race"}
        answers = await asyncio.gather(
            *(alice.post("/api/traces", json=BODY, headers=headers) for _ in range(4))
        )
        # A loser of the race may be told to retry (409 concurrent_update, Retry-After);
        # its retry answers the winner's trace.
        for i, answer in enumerate(answers):
            if answer.status_code == 409:
                assert answer.json()["error"]["code"] == "concurrent_update"
                answers[i] = await alice.post("/api/traces", json=BODY, headers=headers)
        assert {a.status_code for a in answers} == {202}
        assert len({a.json()["trace_id"] for a in answers}) == 1
        assert len(await ids(alice)) == 1


async def test_the_same_key_under_another_api_key_never_reaches_the_first_trace(
    gateway: RunningGateway,
) -> None:
    headers = {"Idempotency-Key": "shared-name"}
    async with gateway.client(KEY_A) as alice, gateway.client(KEY_B) as mallory:
        mine = (await alice.post("/api/traces", json=BODY, headers=headers)).json()
        theirs = await mallory.post("/api/traces", json=BODY, headers=headers)
        assert theirs.status_code == 202
        assert theirs.json()["trace_id"] != mine["trace_id"]
        assert await ids(mallory) == [theirs.json()["trace_id"]]
        assert (await mallory.get(f"/api/traces/{mine['trace_id']}")).status_code == 404
        assert await ids(alice) == [mine["trace_id"]]


@pytest.mark.parametrize("key", ["", "a b", "x" * 256])
async def test_a_key_that_is_no_token_is_refused(gateway: RunningGateway, key: str) -> None:
    async with gateway.client(KEY_A) as alice:
        answer = await alice.post("/api/traces", json=BODY, headers={"Idempotency-Key": key})
        assert answer.status_code == 422
        assert await ids(alice) == []


async def test_a_key_whose_trace_was_deleted_is_refused_for_good_not_unavailable(
    gateway: RunningGateway,
) -> None:
    """A client that retries on 503 with the same key (a longhaul parent does) must be told
    the trace is gone, once: not "unavailable", and not a second run behind the delete."""
    headers = {"Idempotency-Key": "parent-9:call-3"}
    async with gateway.client(KEY_A) as alice:
        first = await alice.post("/api/traces", json=BODY, headers=headers)
        trace_id = first.json()["trace_id"]
        assert (await alice.delete(f"/api/traces/{trace_id}")).status_code == 200
        for _ in range(2):
            again = await alice.post("/api/traces", json=BODY, headers=headers)
            assert again.status_code == 409, again.text
            assert "Retry-After" not in again.headers
            error = again.json()["error"]
            assert error["code"] == "idempotency_conflict"
            assert "deleted" in error["message"]
        assert await ids(alice) == []
