"""The loop: model → assistant message → tools → … → final answer → Completed."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from longhaul.domain import events as ev

from tests.unit.agent.support import AgentRun, answer, call, calls, path_roles, trace_dir


async def test_tool_step_then_final_answer_completes(tmp_path: Path) -> None:
    home = trace_dir(tmp_path)
    (home / "notes.txt").write_text("hello\n")
    run = AgentRun(tmp_path, "read notes.txt")
    outcome = await run.turn(calls(call("read", {"path": "notes.txt"}, id="c1")), answer("done"))
    state, sink = run.state, run.sink
    assert outcome.end == "completed" and outcome.steps == 2
    assert state.status == "completed" and state.summary == "done"
    assert path_roles(state) == ["user", "assistant", "tool", "assistant"]
    tool_msg = state.messages[state.path[2]]
    assert tool_msg.tool_call_id == "c1" and "hello" in str(tool_msg.content)
    completed = sink.of_type(ev.Completed)[0]
    assert completed.totals.prompt_tokens == state.totals.prompt_tokens > 0
    second = run.script.requests[1].messages
    assert second[-1]["role"] == "tool" and second[-1]["tool_call_id"] == "c1"


def test_the_engine_and_the_providers_never_import_nats() -> None:
    """The pure core: importing the whole agent and llm packages loads no NATS client."""
    probe = (
        "import sys, longhaul.agent, longhaul.agent.engine, longhaul.agent.tools.builtin,"
        " longhaul.llm, longhaul.llm.registry, longhaul.llm.providers.openai,"
        " longhaul.llm.providers.anthropic, longhaul.llm.providers.gemini;"
        "sys.exit(any(m == 'nats' or m.startswith('nats.') for m in sys.modules))"
    )
    assert subprocess.run([sys.executable, "-c", probe], check=False).returncode == 0
