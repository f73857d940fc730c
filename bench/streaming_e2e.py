"""End-to-end streaming overhead (issue 5): fake server → openai provider → engine →
``lh.live.<trace_id>``, against a bare httpx read of the same stream.

The fake (bench_streaming's child process, :class:`StampedOpenAI`) streams
:data:`E2E_DELTAS` distinct 6-character text deltas ``interval_s`` apart and notes, for each,
the ``perf_counter`` stamp it takes just before writing it (the stamp behind the provider
table's "last event" figure; CLOCK_MONOTONIC on Linux, so comparable across processes). An
in-process executor whose ``openai`` provider points at the fake runs one trace per round; a
core NATS subscription on ``lh.live.<trace_id>`` notes when each ``delta`` update arrives and
another on the trace's ``completed`` subject when that event is published (as in
bench_executor). Rounds alternate with a bare httpx read of the identical stream that notes
when each delta line arrives.

Per delta: (time the text arrived on ``lh.live``) - (time the server wrote it). A live message
carries one delta with ``flush_interval_ms=0`` and many with the default 50 ms; each delta in
it counts with the message's arrival.
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass
from typing import Any, Protocol

import httpx
import msgspec
from longhaul.agent.contract import LiveUpdate
from longhaul.core.config import LonghaulConfig, NatsConfig, StoreConfig
from longhaul.core.connection import Connection, connect
from longhaul.core.provision import ProvisionSettings
from longhaul.core.store import EventStore
from longhaul.domain.config import ModelPrice, ModelsConfig, PipelineConfig, StreamingConfig
from longhaul.domain.ids import new_id

from bench.common import median, percentile, report
from tests.support.llm_fakes import FakeOpenAI, RecordedRequest, Reply
from tests.support.stack import InProcessExecutor, create_trace

E2E_MODEL = "e2e"
E2E_DELTAS = 200
E2E_INTERVAL_S = 0.001
DEFAULT_FLUSH_MS = StreamingConfig().flush_interval_ms
ROUND_TIMEOUT_S = 60.0

Sent = list[tuple[float, str]]
"""(server write stamp, delta text), in stream order."""


def e2e_text(deltas: int = E2E_DELTAS) -> str:
    """``w0000 w0001 …``: 6 characters per delta, every delta distinct."""
    return "".join(f"w{n:04d} " for n in range(deltas))


def e2e_reply() -> Reply:
    return Reply(text=e2e_text(), chunk=6, interval_s=E2E_INTERVAL_S)


# -- server side (bench_streaming's child process) ---------------------------------------


class _StampingWriter:
    """Stands in for the fake's response writer: forwards every event and notes the write
    stamp of each text delta (the one the writer takes just before writing its bytes)."""

    def __init__(self, out: Any, sent: Sent) -> None:
        self._out = out
        self._sent = sent

    async def event(self, data: Any, event: str | None = None) -> None:
        await self._out.event(data, event)
        choices = data.get("choices") if isinstance(data, dict) else None
        content = choices[0]["delta"].get("content") if choices else None
        if content:
            self._sent.append((self._out._last_payload_at, content))


class StampedOpenAI(FakeOpenAI):
    """FakeOpenAI that records the write stamps of the :data:`E2E_MODEL` streams' deltas in
    :attr:`sent` (the serving loop ships and clears them after each response)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.sent: Sent = []

    async def stream_reply(self, reply: Reply, request: RecordedRequest, out: Any) -> None:
        if request.json["model"] == E2E_MODEL:
            out = _StampingWriter(out, self.sent)  # stream_reply only calls `event`
        await super().stream_reply(reply, request, out)


# -- client side -------------------------------------------------------------------------


class StreamServer(Protocol):
    async def last_byte(self) -> float: ...
    async def sent(self) -> Sent: ...


@dataclass
class Round:
    sent: Sent
    received: list[tuple[float, str]]
    """(receive stamp, text) per live message or per SSE delta line."""
    last_byte: float
    end: float
    """Bare read: ``[DONE]`` read; executor: ``completed`` event received."""

    @property
    def merged_ok(self) -> bool:
        merged = "".join(text for _, text in self.received)
        return merged == "".join(text for _, text in self.sent) == e2e_text()

    def per_delta_ms(self) -> list[float]:
        """For every delta the server wrote: arrival of the message carrying it - its write."""
        owner: list[float] = []
        for at, text in self.received:
            owner += [at] * len(text)
        latencies, offset = [], 0
        for stamp, text in self.sent:
            offset += len(text)
            latencies.append((owner[offset - 1] - stamp) * 1e3)
        return latencies

    def newest_ms(self) -> list[float]:
        """Per message: its arrival - the write of the newest delta in it (pure delivery)."""
        written, offset = {}, 0
        for stamp, text in self.sent:
            offset += len(text)
            written[offset] = stamp
        latencies, offset = [], 0
        for at, text in self.received:
            offset += len(text)
            if offset in written:
                latencies.append((at - written[offset]) * 1e3)
        return latencies

    @property
    def tail_ms(self) -> float:
        return (self.end - self.last_byte) * 1e3


async def bare_round(client: httpx.AsyncClient, server: StreamServer) -> Round:
    body = {
        "model": E2E_MODEL,
        "messages": [{"role": "user", "content": "go"}],
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    received: list[tuple[float, str]] = []
    end = 0.0
    async with client.stream("POST", "chat/completions", json=body) as response:
        async for line in response.aiter_lines():
            at = time.perf_counter()
            if line == "data: [DONE]":
                end = at
            elif line.startswith("data: "):
                choices = json.loads(line[6:])["choices"]
                if choices and choices[0]["delta"].get("content"):
                    received.append((at, choices[0]["delta"]["content"]))
    return await _finish(server, received, end)


async def _finish(server: StreamServer, received: list[tuple[float, str]], end: float) -> Round:
    """The server reports the response's last-byte stamp, then its deltas' write stamps."""
    last_byte = await server.last_byte()
    return Round(await server.sent(), received, last_byte, end)


_decode_live = msgspec.json.Decoder(LiveUpdate).decode


async def executor_round(conn: Connection, store: EventStore, server: StreamServer) -> Round:
    trace_id = new_id("t")
    loop = asyncio.get_running_loop()
    received: list[tuple[float, str]] = []
    status: asyncio.Future[str] = loop.create_future()
    completed: asyncio.Future[float] = loop.create_future()

    async def on_live(msg: Any) -> None:
        at = time.perf_counter()
        update = _decode_live(msg.data)
        if update.kind == "delta":
            received.append((at, update.text))
        elif update.kind == "status" and not status.done():
            status.set_result(update.text)

    async def on_completed(msg: Any) -> None:
        if not completed.done():
            completed.set_result(time.perf_counter())

    subs = [
        await conn.nc.subscribe(conn.names.live(trace_id), cb=on_live),
        await conn.nc.subscribe(
            conn.names.subject("trace", trace_id, "completed"), cb=on_completed
        ),
    ]
    await conn.nc.flush()
    try:
        await create_trace(store, "go", trace_id=trace_id, model=f"openai:{E2E_MODEL}")
        # The turn's final status update follows its last event; it also means every delta
        # (same publisher, same subject) has arrived.
        ended = await asyncio.wait_for(status, ROUND_TIMEOUT_S)
        if ended != "completed":
            raise RuntimeError(f"trace {trace_id} ended {ended!r}, not completed")
        end = await asyncio.wait_for(completed, ROUND_TIMEOUT_S)
    finally:
        for sub in subs:
            await sub.unsubscribe()
    return await _finish(server, received, end)


@dataclass
class Variant:
    flush_ms: int
    rounds: list[Round]


async def run_variant(
    url: str,
    models: ModelsConfig,
    client: httpx.AsyncClient,
    server: StreamServer,
    flush_ms: int,
    rounds: int,
    bare: list[Round],
) -> Variant:
    """``rounds`` traces on a fresh in-process executor with ``flush_interval_ms=flush_ms``,
    each followed by a bare read (appended to ``bare``); one warm-up pair first."""
    namespace = f"st{flush_ms}{new_id('r')[-6:].lower()}_"
    config = LonghaulConfig(
        nats=NatsConfig(url=url, namespace=namespace),
        store=StoreConfig(lease_ttl_s=30),
        models=models.model_copy(
            update={
                "prices": {  # free, and no "no price known" warning
                    **models.prices,
                    f"openai:{E2E_MODEL}": ModelPrice(input=0.0, output=0.0),
                }
            }
        ),
        pipeline=PipelineConfig(streaming=StreamingConfig(flush_interval_ms=flush_ms)),
    )
    conn = await connect(
        NatsConfig(url=url, namespace=namespace), provision_settings=ProvisionSettings()
    )
    store = EventStore(conn)
    variant = Variant(flush_ms, [])
    try:
        async with InProcessExecutor(url, namespace, f"bench-stream-{flush_ms}", config=config):
            await executor_round(conn, store, server)  # warm-up: imports, connections
            await bare_round(client, server)
            for _ in range(rounds):
                variant.rounds.append(await executor_round(conn, store, server))
                bare.append(await bare_round(client, server))
    finally:
        await conn.close()
    return variant


async def measure(
    server: StreamServer, url: str, models: ModelsConfig, rounds: int, throttled_rounds: int
) -> None:
    provider = models.providers["openai"]
    assert provider.base_url is not None and provider.api_key is not None
    headers = {"Authorization": f"Bearer {provider.api_key.get_secret_value()}"}
    bare: list[Round] = []
    async with httpx.AsyncClient(base_url=provider.base_url, headers=headers) as client:
        variants = [
            await run_variant(url, models, client, server, 0, rounds, bare),
            await run_variant(
                url, models, client, server, DEFAULT_FLUSH_MS, throttled_rounds, bare
            ),
        ]
    every = [*bare, *(r for v in variants for r in v.rounds)]
    bad = [r for r in every if not r.merged_ok]
    assert not bad, f"{len(bad)} of {len(every)} streams did not merge back to the text"
    report_rounds(bare, variants)


def _summary(rounds: list[Round]) -> dict[str, float]:
    per_delta = [v for r in rounds for v in r.per_delta_ms()]
    newest = [v for r in rounds for v in r.newest_ms()]
    tails = [r.tail_ms for r in rounds]
    return {
        "messages": median([len(r.received) for r in rounds]),
        "p50": median(per_delta),
        "p95": percentile(per_delta, 95),
        "newest": median(newest),
        "tail50": median(tails),
        "tail95": percentile(tails, 95),
    }


def report_rounds(bare: list[Round], variants: list[Variant]) -> None:
    base = _summary(bare)
    live = [_summary(v.rounds) for v in variants]

    def row(label: str, key: str, added: bool = False) -> list[Any]:
        if added:
            return [label, "", *(s[key] - base[key] for s in live)]
        return [label, base[key], *(s[key] for s in live)]

    merged = [f"yes, {len(bare)} reads", *(f"yes, {len(v.rounds)} traces" for v in variants)]
    report(
        "streaming: end to end via lh.live vs bare httpx",
        ["measure", "bare httpx read", *(f"lh.live, flush {v.flush_ms} ms" for v in variants)],
        [
            row(f"messages per answer ({E2E_DELTAS} deltas streamed)", "messages"),
            row("delta written → received, p50 (ms)", "p50"),
            row("delta written → received, p95 (ms)", "p95"),
            row("added per delta over bare read, p50 (ms)", "p50", added=True),
            row("newest delta in a message written → received, p50 (ms)", "newest"),
            row("last byte → end, p50 (ms)", "tail50"),
            row("last byte → end, p95 (ms)", "tail95"),
            row("added last byte → end over bare read, p50 (ms)", "tail50", added=True),
            ["merged deltas == streamed text", *merged],
        ],
        [
            f"{E2E_DELTAS} deltas of 6 characters, {E2E_INTERVAL_S * 1e3:g} ms apart; "
            "written = the fake server's stamp just before the write (child process, "
            "CLOCK_MONOTONIC); received = the subscriber's callback (core NATS) or httpx's line",
            "end: bare read = '[DONE]' read; lh.live = the trace's 'completed' event received "
            "on a core subscription; last byte = the server writing '[DONE]'",
            "in-process executor: the subscriber shares its event loop; local nats-server; "
            "bare reads alternate with traces; percentiles over all deltas of all rounds",
            f"merged-text check: ok, the live deltas of every trace joined equal the "
            f"{len(e2e_text())}-character streamed text (asserted)",
        ],
    )
