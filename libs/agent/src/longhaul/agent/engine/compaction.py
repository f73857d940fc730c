"""Level-2 compaction's summariser: a small agent on a side branch that writes the summary.

The branch (``branch_type="compression"``, every message ``side_branch``) hangs off the last
message it summarises and starts with a prompt that shows the goal tree in full — each
goal's reason, criteria and, once closed, its result, ``agent_call`` goals with their
sub-agents' results — so what the plan learnt survives the summary. Then up to
:data:`MAX_ROUNDS` rounds of the utility model: the first ones may call the trace's
read-only tools (to check a path, re-read a file), the last one gets no tools; the first
answer without tool calls is the summary. The Summarization middleware appends it on the
main path (``engine`` never decides where it goes).
"""

from __future__ import annotations

from longhaul.agent.engine.side_branch import SideBranch
from longhaul.agent.middleware.base import ToolHandler
from longhaul.agent.turn import Turn
from longhaul.llm.types import ModelError

MAX_ROUNDS = 5
SYSTEM = "You write faithful, compact working summaries for an AI agent."
PROMPT = (
    "Context is running out. Write a summary of the conversation so far that lets you "
    "continue the task without it: the task and its constraints, decisions made, facts and "
    "results found (with file paths, identifiers, numbers), the state of each goal, what was "
    "being done last, and the next steps. Be complete and concise.\n\n"
    "The plan as it stands, with what each finished goal and sub-agent found:\n{goals}\n\n"
    "You may check facts with the read-only tools first ({rounds} model rounds in all, the "
    "last without tools). Then answer with the summary only."
)


async def summarise(turn: Turn, call_tool: ToolHandler, keep: int) -> str:
    """The summary of the main path's first ``keep`` messages, written on a side branch;
    raises :class:`ModelError` (noted on the branch) when the summariser fails."""
    state = turn.state
    branch = SideBranch(
        turn, "compression", turn.history.at(list(range(keep))), parent=state.path[keep - 1]
    )
    goals = state.goals.render(summaries=True)
    await branch.add("user", content=PROMPT.format(goals=goals, rounds=MAX_ROUNDS), synthetic=True)
    tools = turn.tools.read_only()
    model = turn.utility_model
    for number in range(1, MAX_ROUNDS + 1):
        last = number == MAX_ROUNDS
        try:
            response = await branch.call(
                model, system=SYSTEM, specs=None if last else tools.specs(), purpose="compaction"
            )
        except ModelError as exc:
            await branch.failed("compaction", exc)
            raise
        if response.tool_calls and not last:
            await branch.run_tools(response, tools, call_tool)
            continue
        if response.content:
            return response.content
        break
    raise ModelError("the summariser gave no summary")
