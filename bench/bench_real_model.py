"""Streaming from a real model (issue 10): what a client of the gateway's SSE sees against a
client reading llama.cpp's server directly, in one run, as ratios.

One llama.cpp server (packaged SmolLM2-135M, tests/support/llama.py) behind the recording
proxy with steering off, a private nats-server, a gateway and an in-process executor whose
``openai`` provider points at the proxy. Rounds alternate:

- **gateway**: ``POST /api/traces`` then ``GET /api/traces/{id}/events`` (SSE); time to first
  token is from the POST to the first ``live`` text delta, tokens/s is the answer's
  completion tokens (from its usage) over the time from first to last delta;
- **direct**: the exact body the executor sent in the previous gateway round (recorded by the
  proxy), replayed by httpx straight at the proxy: same prompt, same proxy hop, same cache
  state, so the difference is longhaul (executor, NATS, gateway, SSE).

Both ask for the same ``max_tokens`` at temperature 0 with a seed. A gateway round whose SSE
subscription missed the first delta (live deltas are not persisted) is reported, not hidden.
The gateway's deltas are flushed every ``flush_interval_ms`` (50), so its first delta may
carry several tokens: its tokens/s reads up to one flush interval high. On a shared 2-core
machine the llama.cpp decode rate swings with other load; compare the ratios of one run.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from longhaul.core import event_loop
from longhaul.core.config import LonghaulConfig, NatsConfig, StoreConfig

from bench.common import median, private_nats, report
from tests.integration.gateway.harness import gateway_config, serve_gateway, sse_events
from tests.real_model.conftest import real_models
from tests.support.llama import LlamaProcess, SteeringProxy
from tests.support.stack import InProcessExecutor

PROMPT = "Tell me a short story about a fox who learns to sail."
MAX_TOKENS = 64
ROUND_TIMEOUT_S = 120.0


@dataclass
class Sample:
    ttft_s: float
    tokens_per_s: float
    complete: bool = True


async def gateway_round(client: httpx.AsyncClient) -> tuple[Sample, str]:
    started = time.perf_counter()
    response = await client.post(
        "/api/traces",
        json={
            "messages": [{"role": "user", "content": PROMPT}],
            "model": "openai:smollm2",
            "tools": [],
            "system_prompt": "You are a storyteller.",
            "max_iterations": 1,
            "model_params": {"temperature": 0, "seed": 1, "max_tokens": MAX_TOKENS},
        },
    )
    response.raise_for_status()
    trace_id = response.json()["trace_id"]
    stamps: list[float] = []
    text: list[str] = []
    answer: dict[str, Any] = {}
    async with (
        asyncio.timeout(ROUND_TIMEOUT_S),
        client.stream(
            "GET",
            f"/api/traces/{trace_id}/events",
            timeout=ROUND_TIMEOUT_S,
        ) as events,
    ):
        async for sse in sse_events(events):
            data = sse.json() if sse.event not in ("heartbeat", "end") else {}
            if sse.event == "live" and data.get("kind") == "delta" and data.get("text"):
                stamps.append(time.perf_counter())
                text.append(data["text"])
            elif data.get("type") == "message_appended" and data.get("role") == "assistant":
                answer = data
            elif data.get("type") in ("completed", "failed", "stopped"):
                break
    tokens = (answer.get("usage") or {}).get("completion_tokens", 0)
    span = stamps[-1] - stamps[0] if len(stamps) > 1 else float("nan")
    complete = "".join(text) == (answer.get("content") or "")
    return Sample(stamps[0] - started, tokens / span, complete), trace_id


async def direct_round(proxy_url: str, body: dict[str, Any]) -> Sample:
    started = time.perf_counter()
    stamps: list[float] = []
    tokens = 0
    async with (
        httpx.AsyncClient(timeout=ROUND_TIMEOUT_S) as client,
        client.stream(
            "POST",
            f"{proxy_url}/chat/completions",
            json=body,
        ) as response,
    ):
        async for line in response.aiter_lines():
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            chunk = json.loads(line[6:])
            if chunk.get("usage"):
                tokens = chunk["usage"]["completion_tokens"]
            for choice in chunk.get("choices") or ():
                if (choice.get("delta") or {}).get("content"):
                    stamps.append(time.perf_counter())
    return Sample(stamps[0] - started, tokens / (stamps[-1] - stamps[0]))


async def main(rounds: int) -> None:
    with private_nats() as nats_url, tempfile.TemporaryDirectory(prefix="lh-bench-") as work:
        nats = NatsConfig(url=nats_url, namespace="benchreal_")
        async with LlamaProcess() as llama, SteeringProxy(llama.url).serve() as proxy:
            config = LonghaulConfig(
                nats=nats, store=StoreConfig(lease_ttl_s=5), models=real_models(proxy, 0)
            )
            async with (
                serve_gateway(gateway_config(nats)) as gateway,
                InProcessExecutor(
                    nats_url,
                    nats.namespace,
                    "exec-bench",
                    config=config,
                    settings={"working_root": Path(work)},
                ),
                gateway.client() as client,
            ):
                await gateway_round(client)  # warm-up: model pages, prompt cache, connections
                via_gateway: list[Sample] = []
                direct: list[Sample] = []
                for _ in range(rounds):
                    sample, _trace = await gateway_round(client)
                    via_gateway.append(sample)
                    body = proxy.seen[-1].body
                    direct.append(await direct_round(proxy.base_url(0, openai=True), body))
    ttft = [median([s.ttft_s for s in samples]) * 1000 for samples in (direct, via_gateway)]
    rate = [median([s.tokens_per_s for s in samples]) for samples in (direct, via_gateway)]
    rows: list[list[object]] = [
        [name, ttft[i], rate[i], rounds]
        for i, name in enumerate(("direct (llama.cpp)", "gateway SSE"))
    ]
    ttft_ratio = ttft[1] / ttft[0]
    rate_ratio = rate[1] / rate[0]
    missed = sum(not s.complete for s in via_gateway)
    report(
        "real model streaming: gateway SSE vs llama.cpp direct",
        ["client", "time to first token ms (median)", "tokens/s (median)", "rounds"],
        rows,
        notes=[
            f"ratios gateway/direct: time to first token x{ttft_ratio:.3g}, "
            f"tokens/s x{rate_ratio:.3g}",
            f"gateway rounds whose SSE text differs from the answer: {missed}",
        ],
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    event_loop.run(main(3 if args.quick else 8))
