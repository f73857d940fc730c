"""Compaction through the real stack: a client's newest message survives verbatim; level 2
runs on a side branch, and a rewind into a compacted range restores the originals."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
from longhaul.core.config import NatsConfig
from longhaul.core.store import EventStore
from longhaul.domain.config import CompressionConfig, ModelsConfig, PipelineConfig

from tests.integration.executor.served import gateway_and_executor
from tests.integration.gateway.harness import gateway_config, serve_gateway
from tests.support.folds import trace_state
from tests.support.llm_fakes import Call, FakeOpenAI, RecordedRequest, Reply
from tests.support.stack import InProcessExecutor, test_config, wait_for_trace

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


def summariser_and_agent() -> Callable[[RecordedRequest], Reply]:
    """One fake for every role: a request carrying the compaction prompt is the side branch
    (a look with glob, then the summary), the reflection level 2 runs first (the key has an
    experience store) answers none; the agent's turns go by its request count."""
    agent_turns = iter(
        [
            Reply(tool_calls=[Call("glob", {"pattern": "*.txt"})]),
            Reply(text="first answer"),
            Reply(text="report done"),
            Reply(text="again done"),
        ]
    )

    def model(request: RecordedRequest) -> Reply:
        messages = request.json["messages"]
        if has(request, REFLECTION_PROMPT):  # level 2 first keeps what was learnt
            return Reply(text='{"experiences": []}')
        if any(str(m.get("content", "")).startswith(BRANCH_PROMPT) for m in messages):
            if messages[-1]["role"] == "user":
                return Reply(tool_calls=[Call("glob", {"pattern": "**/*"})])
            return Reply(text="SUMMARY: the task wants a report")
        return next(agent_turns)

    return model


BRANCH_PROMPT = "Context is running out."
REFLECTION_PROMPT = "Pause and reflect on the work so far"


def has(request: RecordedRequest, text: str) -> bool:
    return any(text in str(m.get("content")) for m in request.json["messages"])


async def test_level_two_runs_on_a_side_branch_and_a_rewind_restores_the_originals(
    nats_config: NatsConfig, nats_url: str, namespace: str, store: EventStore, tmp_path: Path
) -> None:
    async with FakeOpenAI(default=summariser_and_agent()) as fake:
        config = test_config(nats_url, namespace, models=fake.models_config())
        async with gateway_and_executor(
            nats_config, config, tmp_path / "work", "exec-branch"
        ) as gateway:
            async with gateway.client() as http:
                create = {
                    "messages": [{"role": "user", "content": "the task"}],
                    "model": "openai:fake-model",
                    "tools": ["glob", "read", "write"],
                    "name": "the task",  # named: no title is asked of the model
                }
                trace_id = await run_and_wait(http, "/api/traces", create, 1)
                # a compaction asked of an ended trace runs at its next model call
                assert (await http.post(f"/api/traces/{trace_id}/compact")).status_code == 202
                await wait_for_trace(store, trace_id, lambda s: s.runs == 2 and s.is_final)
                report = {"messages": [{"role": "user", "content": "now report"}]}
                await run_and_wait(http, f"/api/traces/{trace_id}/run", report, 3, trace_id)
                compacted = await trace_state(store, trace_id)
                rewind = {"after_sequence": 2, "messages": [{"role": "user", "content": "again"}]}
                await run_and_wait(http, f"/api/traces/{trace_id}/run", rewind, 4, trace_id)
                rewound = await trace_state(store, trace_id)
    assert not fake.rejected
    requests = fake.requests
    branch = [r for r in requests if has(r, BRANCH_PROMPT)]
    # the side branch: two rounds of the summariser, the first with the read-only tools only
    # and the goal tree's full view in its prompt
    assert len(branch) == 2
    offered = {tool["function"]["name"] for tool in branch[0].json.get("tools", [])}
    assert offered == {"glob", "read"}
    assert has(branch[0], "[>] root: the task (focus)")
    assert branch[1].json["messages"][-1]["role"] == "tool"  # it saw its glob's result
    aside = [m for m in compacted.all_messages() if m.side_branch]
    assert [(m.role, m.branch_type) for m in aside] == [
        ("user", "compression"),
        ("assistant", "compression"),
        ("tool", "compression"),
        ("assistant", "compression"),
    ]
    assert aside[0].parent_sequence == 4  # under the last message it summarises
    assert not {m.sequence for m in aside} & set(compacted.path)
    path = compacted.main_path()
    assert [m.role for m in path] == ["user", "user", "user", "assistant"]
    assert path[1].branch_type == "compression"
    assert str(path[1].content).startswith("[Summary of messages 2-4]\nSUMMARY: the task wants")
    assert (path[2].content, path[3].content) == ("now report", "report done")
    after = requests[requests.index(branch[1]) + 1]
    assert has(after, "SUMMARY: the task wants") and not has(after, "first answer")
    # a rewind into the compacted range: the new branch carries the original messages again
    assert [m.sequence for m in rewound.main_path()][:3] == [1, 2, 3]
    assert [m.content for m in rewound.main_path()][-2:] == ["again", "again done"]
    last = requests[-1].json["messages"]
    assert any(m.get("tool_calls") for m in last) and any(m["role"] == "tool" for m in last)
    assert not has(requests[-1], "[Summary of messages")
