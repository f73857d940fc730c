"""SubagentLimit (after_model): at most ``max_concurrent_subtraces`` (3) ``agent`` calls per
model turn. The extras never run; each is answered with an explanation so the model can issue
them again once the first ones reported back."""

from __future__ import annotations

from longhaul.agent.messages import failure
from longhaul.agent.middleware.base import Middleware
from longhaul.agent.turn import Step, Turn

AGENT = "agent"


class SubagentLimit(Middleware):
    async def after_model(self, turn: Turn, step: Step) -> None:
        limit = turn.config.max_concurrent_subtraces
        calls = [call for call in step.calls if call.name == AGENT]
        for call in calls[limit:]:
            step.answered[call.id] = failure(
                "subagent_limit",
                f"not started: at most {limit} agent calls per turn. Issue it again after the "
                "running ones report back (explore mode takes several tasks in one call).",
            )
