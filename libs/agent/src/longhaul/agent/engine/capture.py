"""``memory.capture_on_completion``: a completing run reflects into experiences first.

Before a root trace's run records ``completed``, the same reflection ``POST /reflect`` asks
for runs on a side branch (``longhaul.agent.engine.reflection``: read-only tools, at most five
model calls, JSON experiences stored for the trace's key), and ``experiences_captured`` {run,
ids, error} records what it kept. Once per run: a run whose capture is on the log (the
executor died before its ``completed``) completes without reflecting again. A run that made
no model call (a reflection or compaction re-finishing the trace), a sub-trace, or a trace
or preset with ``experiences: false`` captures nothing.
"""

from __future__ import annotations

from longhaul.agent.turn import Turn
from longhaul.domain.events import ExperiencesCaptured


def wants_capture(turn: Turn) -> bool:
    state, env = turn.state, turn.env
    if not env.memory.capture_on_completion or env.experiences is None or turn.reflect is None:
        return False
    if state.parent_trace_id is not None or not state.run_usage.iterations:
        return False
    if state.runs in state.captured:
        return False
    return turn.settings.experiences


async def capture(turn: Turn) -> None:
    assert turn.reflect is not None
    ids, error = await turn.reflect()
    await turn.emit([ExperiencesCaptured(run=turn.state.runs, ids=ids, error=error)])
