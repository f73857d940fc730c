"""Streaming overhead of the openai: provider against a bare httpx read of the same stream.

A fake Chat Completions server (tests/support/llm_fakes.py) runs in a child process, on the
other core and outside our GIL, and serves the identical SSE stream to every client; the
clients alternate within one run:

* per-delta cost: the server sends the stream as fast as it can; measured is the client
  process's CPU time per delta (wall time is bounded by the server's sending rate) for a
  bare ``httpx`` line read, the same plus ``json.loads`` (the least any consumer must do),
  and our provider (SSE parse, decode, assembly, events);
* tail latency: the server paces its chunks (1 ms apart, like a generating model) so the
  client keeps up; measured is the time from the server writing its last event
  (``data: [DONE]``) to the final ``StreamEnd`` (for httpx, to reading ``[DONE]``). The
  server reports its ``perf_counter`` stamps over a pipe; the clock is system-wide
  (CLOCK_MONOTONIC);
* end to end (bench/streaming_e2e.py): the same server streams 200 deltas 1 ms apart to an
  in-process executor; measured is each delta's arrival on ``lh.live.<trace_id>`` and the
  ``completed`` event's after the last byte, against a bare httpx read, with
  ``flush_interval_ms`` 0 (every chunk forwarded) and the default 50.

Run: ``python -m bench.bench_streaming [--quick] [--deltas N] [--rounds N] [--e2e-rounds N]``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import httpx
from longhaul.core import event_loop
from longhaul.domain.config import ModelsConfig
from longhaul.llm import ModelRegistry, ModelRequest, StreamEnd

from bench import streaming_e2e
from bench.common import median, percentile, private_nats, report
from bench.streaming_e2e import E2E_MODEL, Sent, StampedOpenAI, e2e_reply
from tests.support.llm_fakes import FakeOpenAI, RecordedRequest, Reply

PACED_DELTAS = 200
API_KEY = "bench-key"
SCRIPT = str(Path(__file__).resolve())


# -- server side (child process) ---------------------------------------------------------


class _AnnouncedStamps(list[float]):
    """The fake's last-byte stamps, echoed to the parent as they happen; after an end-to-end
    stream's, the write stamps of its deltas (once the last byte is out, so as not to delay
    it)."""

    def __init__(self, server: StampedOpenAI) -> None:
        super().__init__()
        self.server = server

    def append(self, stamp: float) -> None:
        super().append(stamp)
        print(f"LAST {stamp!r}", flush=True)
        if self.server.sent:
            print(f"SENT {json.dumps(self.server.sent)}", flush=True)
            self.server.sent.clear()


async def serve(deltas: int) -> None:
    fast = Reply(text="token " * deltas, chunk=6)
    paced = Reply(text="token " * PACED_DELTAS, chunk=6, interval_s=0.001)
    replies = {"paced": paced, E2E_MODEL: e2e_reply()}

    def step(request: RecordedRequest) -> Reply:
        return replies.get(request.json["model"], fast)

    async with StampedOpenAI(default=step, api_key=API_KEY) as server:
        server.last_byte_at = _AnnouncedStamps(server)
        print(f"URL {server.base_url}", flush=True)
        await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)


# -- client side -------------------------------------------------------------------------


class ServerProcess:
    def __init__(self, deltas: int) -> None:
        self.deltas = deltas
        self.base_url = ""
        self._process: asyncio.subprocess.Process | None = None

    async def __aenter__(self) -> ServerProcess:
        self._process = await asyncio.create_subprocess_exec(
            sys.executable,
            SCRIPT,
            "--serve",
            str(self.deltas),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
        )
        self.base_url = (await self._line()).removeprefix("URL ")
        return self

    async def _line(self) -> str:
        assert self._process is not None and self._process.stdout is not None
        return (await self._process.stdout.readline()).decode().strip()

    async def last_byte(self) -> float:
        """The server's stamp for the response just finished (stamps arrive in order)."""
        return float((await self._line()).removeprefix("LAST "))

    async def sent(self) -> Sent:
        """After an end-to-end stream's :meth:`last_byte`: its deltas' write stamps."""
        line = await self._line()
        assert line.startswith("SENT "), line
        return [(stamp, text) for stamp, text in json.loads(line.removeprefix("SENT "))]

    async def __aexit__(self, *exc_info: object) -> None:
        assert self._process is not None and self._process.stdin is not None
        self._process.stdin.close()
        await self._process.wait()


async def bare_read(client: httpx.AsyncClient, model: str, parse: bool) -> float:
    """Read the stream with plain httpx; returns the time ``[DONE]`` was read."""
    body = {
        "model": model,
        "messages": [{"role": "user", "content": "go"}],
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    async with client.stream("POST", "chat/completions", json=body) as response:
        async for line in response.aiter_lines():
            if line == "data: [DONE]":
                done = time.perf_counter()
            elif parse and line.startswith("data: "):
                json.loads(line[6:])
    return done


async def provider_read(registry: ModelRegistry, model_string: str) -> float:
    """Consume our provider's stream; returns the time StreamEnd arrived."""
    model = registry.resolve(model_string)
    request = ModelRequest(model=model_string, messages=[{"role": "user", "content": "go"}])
    async for event in model.stream(request):
        if isinstance(event, StreamEnd):
            return time.perf_counter()
    raise AssertionError("no StreamEnd")


async def measure(deltas: int, rounds: int, e2e_rounds: int) -> None:
    async with ServerProcess(deltas) as server:
        config = FakeOpenAI(api_key=API_KEY).models_config()
        config.providers["openai"].base_url = server.base_url
        await provider_tables(server, config, deltas, rounds)
        with private_nats() as url:
            await streaming_e2e.measure(server, url, config, e2e_rounds, max(3, e2e_rounds // 2))


async def provider_tables(
    server: ServerProcess, config: ModelsConfig, deltas: int, rounds: int
) -> None:
    headers = {"Authorization": f"Bearer {API_KEY}"}
    times: dict[str, list[float]] = {"lines": [], "json": [], "ours": []}
    cpu_times: dict[str, list[float]] = {"lines": [], "json": [], "ours": []}
    tails: dict[str, list[float]] = {"lines": [], "ours": []}
    async with (
        ModelRegistry(config, env={}) as registry,
        httpx.AsyncClient(base_url=server.base_url, headers=headers) as client,
    ):

        def runners(model: str) -> dict[str, Any]:
            return {
                "lines": lambda: bare_read(client, model, parse=False),
                "json": lambda: bare_read(client, model, parse=True),
                "ours": lambda: provider_read(registry, f"openai:{model}"),
            }

        for run in runners("fast").values():  # warm-up: connections, caches
            await run()
            await server.last_byte()
        for _ in range(rounds):
            for name, run in runners("fast").items():
                start, cpu = time.perf_counter(), time.process_time()
                await run()
                cpu_times[name].append(time.process_time() - cpu)
                times[name].append(time.perf_counter() - start)
                await server.last_byte()
        for _ in range(rounds):
            for name, run in runners("paced").items():
                end = await run()
                stamp = await server.last_byte()
                if name in tails:
                    tails[name].append((end - stamp) * 1e3)

    per_delta = {name: median(values) / deltas * 1e6 for name, values in cpu_times.items()}
    wall = {name: median(values) * 1e3 for name, values in times.items()}
    report(
        "streaming: openai provider vs bare httpx",
        ["measure", "httpx lines", "httpx + json.loads", "openai provider", "ratio provider/lines"],
        [
            [
                f"client CPU per delta (µs), {deltas} deltas",
                per_delta["lines"],
                per_delta["json"],
                per_delta["ours"],
                per_delta["ours"] / per_delta["lines"],
            ],
            [
                "whole stream, wall (ms)",
                wall["lines"],
                wall["json"],
                wall["ours"],
                wall["ours"] / wall["lines"],
            ],
            [
                "last event → end, p50 (ms)",
                median(tails["lines"]),
                "",
                median(tails["ours"]),
                median(tails["ours"]) / median(tails["lines"]),
            ],
            [
                "last event → end, p95 (ms)",
                percentile(tails["lines"], 95),
                "",
                percentile(tails["ours"], 95),
                "",
            ],
        ],
        [
            "provider cost per delta: "
            f"{per_delta['ours'] - per_delta['lines']:.1f} µs over a bare read, "
            f"{per_delta['ours'] - per_delta['json']:.1f} µs over read + json.loads",
            f"{rounds} rounds, medians; tail runs stream {PACED_DELTAS} deltas 1 ms apart; "
            "server in a child process",
        ],
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--deltas", type=int, default=5000)
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument(
        "--e2e-rounds",
        type=int,
        default=20,
        help="traces with flush_interval_ms=0 (half as many with the default)",
    )
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--serve", type=int, metavar="DELTAS", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        event_loop.run(serve(args.serve))
        return
    if args.quick:
        args.deltas, args.rounds, args.e2e_rounds = 1000, 5, 5
    event_loop.run(measure(args.deltas, args.rounds, args.e2e_rounds))


if __name__ == "__main__":
    main()
