"""``scripted:demo`` on a real stack: the offline run ``make run`` shows plans with the goal
tool, lists and reads the workdir, writes a result file, delegates a check to a sub-agent,
marks its goals done and says what it did."""

from __future__ import annotations

import asyncio
from pathlib import Path

from longhaul.llm.scripted.demo import RESULT_FILE

from tests.integration.gateway.harness import RunningGateway

DEADLINE_S = 60


async def test_demo_model_plans_reads_writes_delegates_and_reports(
    stack: RunningGateway, tmp_path: Path
) -> None:
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    (work / "notes.txt").write_text("buy milk\ncall Ada\n")
    (work / "todo.md").write_text("# todo\n- ship the viewer\n")
    async with stack.client() as http:
        created = await http.post(
            "/api/traces",
            json={
                "messages": [{"role": "user", "content": "what is in my workdir?"}],
                "model": "scripted:demo?latency_ms=0",
            },
        )
        trace_id = created.json()["trace_id"]
        async with asyncio.timeout(DEADLINE_S):
            async with http.stream("GET", f"/api/traces/{trace_id}/events") as events:
                async for line in events.aiter_lines():
                    if line in ("event: completed", "event: failed"):
                        break
        trace = (await http.get(f"/api/traces/{trace_id}")).json()
        path = (await http.get(f"/api/traces/{trace_id}/messages")).json()["messages"]

    assert trace["status"] == "completed", trace
    goals = trace["goal_tree"]["goals"]
    assert [g["title"] for g in goals] == [
        "Survey the working directory",
        "Write a short result file",
        "Have a sub-agent check the result",
    ]
    assert {g["status"] for g in goals} == {"done"}
    calls = [c["function"]["name"] for m in path for c in m.get("tool_calls") or []]
    assert calls.index("goal") < calls.index("glob") < calls.index("read")
    assert calls.index("read") < calls.index("write") < calls.index("agent")
    written = (work / RESULT_FILE).read_text()
    assert "notes.txt" in written and "todo.md" in written
    # the sub-agent ran as a child trace, read the file and reported
    (child,) = trace["sub_traces"]
    assert child["status"] == "completed"
    assert f"Checked {RESULT_FILE}" in child["summary"]
    answer = path[-1]
    assert answer["role"] == "assistant" and answer["content"].startswith("Done.")
    assert "sub-agent checked it" in answer["content"]
