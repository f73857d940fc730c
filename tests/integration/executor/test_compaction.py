"""Compaction through the real stack: a client's newest message survives verbatim."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
from longhaul.domain.config import CompressionConfig, ModelsConfig, NatsConfig, PipelineConfig

from tests.integration.gateway.harness import gateway_config, serve_gateway
from tests.support.stack import InProcessExecutor, test_config

MODEL = "scripted:auto"
LIMIT = 40_000  # tokens; compaction starts above 80 % (32,000)
FILLER = "lorem ipsum " * (26_000 * 4 // 12)  # ~26,000 tokens: still under the threshold
INSTRUCTION = "NEW INSTRUCTION: now write the report in French. " + "détail " * 4_000


async def run_and_wait(
    http: httpx.AsyncClient, path: str, body: dict[str, Any], runs: int, trace_id: str = ""
) -> str:
    """Post a run, then read the trace's SSE stream until its ``runs``-th run has ended."""
    response = await http.post(path, json=body)
    assert response.status_code == 202, response.text
    trace_id = trace_id or str(response.json()["trace_id"])
    ended = 0
    async with http.stream("GET", f"/api/traces/{trace_id}/events") as stream:
        async for line in stream.aiter_lines():
            if line in ("event: completed", "event: failed", "event: stopped"):
                ended += 1
                if ended == runs:
                    break
    return trace_id


async def test_the_newest_client_message_is_kept_verbatim(
    nats_config: NatsConfig, nats_url: str, namespace: str, tmp_path: Path
) -> None:
    config = test_config(
        nats_url,
        namespace,
        models=ModelsConfig(default=MODEL, context_limits={MODEL: LIMIT}),
        pipeline=PipelineConfig(compression=CompressionConfig(min_tokens=0)),
    )
    async with serve_gateway(gateway_config(nats_config)) as gateway, InProcessExecutor(
        nats_url, namespace, "exec-compact", config=config,
        settings={"working_root": tmp_path / "work"},
    ):  # fmt: skip
        async with gateway.client() as http:
            create = {"messages": [{"role": "user", "content": "the task"}], "model": MODEL}
            trace_id = await run_and_wait(http, "/api/traces", {**create, "tools": []}, 1)
            for runs, content in ((2, FILLER), (3, INSTRUCTION)):
                body = {"messages": [{"role": "user", "content": content}]}
                await run_and_wait(http, f"/api/traces/{trace_id}/run", body, runs, trace_id)
            trace = (await http.get(f"/api/traces/{trace_id}")).json()
            assert trace["status"] == "completed", trace
            path = (await http.get(f"/api/traces/{trace_id}/messages")).json()["messages"]
    kinds = [(m["role"], m["branch_type"]) for m in path]
    summaries = [i for i, m in enumerate(path) if m["branch_type"] == "compression"]
    assert len(summaries) == 1, kinds  # the instruction pushed the history over: compacted
    after = path[summaries[0] + 1 :]
    # The instruction the model was just given follows the summary verbatim, then the answer.
    assert [m["role"] for m in after] == ["user", "assistant"], kinds
    assert after[0]["content"] == INSTRUCTION
    assert "NEW INSTRUCTION" not in path[summaries[0]]["content"]
    assert "lorem ipsum" not in "".join(str(m["content"]) for m in after)
