"""The folds the gateway keeps between the viewer's reads (``gateway.folds_cached``): one fold
per trace, caught up with the log at each request, as many as the setting says, and no way
round ownership or erasure (issue 46)."""

from __future__ import annotations

import httpx
from longhaul.core.config import NatsConfig
from longhaul.core.store import EventStore

from tests.integration.gateway.harness import (
    KEY_A,
    KEY_B,
    append_as_executor,
    assistant,
    gateway_config,
    serve_gateway,
    user_message,
)


async def create(client: httpx.AsyncClient, text: str) -> str:
    response = await client.post("/api/traces", json={"messages": [user_message(text)]})
    assert response.status_code == 202, response.text
    return str(response.json()["trace_id"])


async def test_the_viewer_reads_keep_one_fold_per_trace_and_catch_it_up(
    nats_config: NatsConfig, store: EventStore
) -> None:
    async with (
        serve_gateway(gateway_config(nats_config, folds_cached=2)) as gateway,
        gateway.client() as http,
    ):
        first, *others = [await create(http, f"question {i}") for i in range(3)]
        kept = gateway.runtime.viewed_traces
        opened = (await http.get(f"/api/traces/{first}/messages?mode=all")).json()
        assert [m["sequence"] for m in opened["messages"]] == [1]
        fold = kept.kept(first)
        assert fold is not None and fold.last_sequence == 1

        # the next reads find the same fold, caught up with what was appended since
        await append_as_executor(store, first, assistant(2, "an answer"))
        view = (await http.get(f"/api/traces/{first}")).json()
        newer = (await http.get(f"/api/traces/{first}/messages?mode=all&after=1")).json()
        assert view["last_sequence"] == 2 and newer["head_sequence"] == 2
        assert [m["content"] for m in newer["messages"]] == ["an answer"]
        assert kept.kept(first) is fold and fold.last_sequence == 2

        # bounded by count: two more traces read, the first one's fold is let go
        for other in others:
            assert (await http.get(f"/api/traces/{other}")).status_code == 200
        assert kept.kept(first) is None
        assert all(kept.kept(other) is not None for other in others)
        again = (await http.get(f"/api/traces/{first}/messages?mode=all")).json()
        assert [m["sequence"] for m in again["messages"]] == [1, 2]


async def test_a_kept_fold_is_no_way_round_ownership_or_erasure(
    nats_config: NatsConfig,
) -> None:
    config = gateway_config(nats_config, api_keys=f"{KEY_A},{KEY_B}")
    async with (
        serve_gateway(config) as gateway,
        gateway.client(KEY_A) as alice,
        gateway.client(KEY_B) as mallory,
    ):
        trace = await create(alice, "alice's secret")
        assert (await alice.get(f"/api/traces/{trace}/messages")).status_code == 200
        assert gateway.runtime.viewed_traces.kept(trace) is not None
        for path in ("", "/messages", "/messages?mode=all&before=2&limit=1", "/context"):
            refused = await mallory.get(f"/api/traces/{trace}{path}")
            assert refused.status_code == 404, path
            assert "secret" not in refused.text
        assert (await alice.post(f"/api/traces/{trace}/stop")).status_code == 202
        assert (await alice.delete(f"/api/traces/{trace}")).status_code == 200
        for path in ("", "/messages"):
            assert (await alice.get(f"/api/traces/{trace}{path}")).status_code == 404, path
