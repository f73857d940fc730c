"""``longhaul up`` with ``LONGHAUL_MODEL=local:smollm2``: the executor starts llama.cpp's
server itself, and the operator's ``models.local.tool_prefill`` makes the packaged 135M model
call tools (no proxy can sit in front of a server the executor starts)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import httpx
import pytest
from longhaul.client import AsyncClient

from tests.integration.cli.harness import cli_env, running_up
from tests.support.llama import PREFILL, TEMPLATE, THREADS, wheels_or_fail

pytestmark = pytest.mark.real_model

TOOLS = ["write", "read"]


async def test_a_local_model_trace_calls_tools_through_longhaul_up(tmp_path: Path) -> None:
    wheels_or_fail()
    env = cli_env(
        LONGHAUL_MODEL="local:smollm2",
        LONGHAUL_MODELS__LOCAL__CHAT_TEMPLATE=TEMPLATE,
        LONGHAUL_MODELS__LOCAL__TOOL_PREFILL=PREFILL,
        LONGHAUL_MODELS__LOCAL__THREADS=str(THREADS),
        LONGHAUL_MODELS__LOCAL__N_CTX="1024",
        LONGHAUL_MODELS__LOCAL__PARALLEL="1",
    )
    started = time.monotonic()
    async with running_up(tmp_path / "data", env) as gateway:
        async with AsyncClient(gateway) as client:
            accepted = await client.create_trace(
                "Read the file notes.txt.",
                tools=TOOLS,
                max_iterations=3,
                model_params={"temperature": 0, "seed": 7, "max_tokens": 96},
            )
            trace = await client.wait(accepted.trace_id)
            messages = (await client.messages(accepted.trace_id)).messages
            async with httpx.AsyncClient(base_url=gateway, timeout=30) as http:
                listed = await http.get(f"/api/traces/{accepted.trace_id}/messages")
                finish = {m["sequence"]: m.get("finish_reason") for m in listed.json()["messages"]}
    took = time.monotonic() - started
    print(f"local: {trace.status} ({trace.stop_reason}) through longhaul up in {took:.1f} s")
    log = [m.model_dump(exclude_none=True) for m in messages]
    calling = [m for m in messages if m.role == "assistant" and m.tool_calls]
    assert calling, log
    # the server's own call: its 32-character id (rewritten for the wire, kept in the log),
    # a tool the trace offered, arguments the model wrote and the grammar kept to the schema
    call = calling[0].tool_calls[0]  # type: ignore[index]
    assert len(call.id) == 32 and call.id.isalnum() and call.function.name in TOOLS, log
    if finish[calling[0].sequence] != "length":  # a call cut at max_tokens is left unparsed
        assert isinstance(json.loads(call.function.arguments), dict), log
    results = [m for m in messages if m.role == "tool" and m.tool_call_id == call.id]
    assert len(results) == 1, log
    # steered on the first round only: the next turn may answer (completed), or copy the
    # call it sees in the history (the template renders it) and be stopped as a loop, or by
    # max_iterations if it varies the copies: which one varies between runs, even at
    # temperature 0 with a seed (both seen in consecutive runs)
    if trace.status == "completed":
        assert messages[-1].role == "assistant" and not messages[-1].tool_calls, log
    else:
        assert trace.status == "stopped", (trace.status, trace.error, log)
        assert trace.stop_reason in ("loop_detected", "max_iterations"), log
        assert len(calling) >= 2, log  # an unsteered turn called a tool again
