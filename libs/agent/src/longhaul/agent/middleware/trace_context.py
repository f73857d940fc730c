"""TraceContext (before_agent): the trace's preset, tools, skills, working directory and
system prompt, resolved once per turn, then pinned to what the trace recorded (``run_context``)."""

from __future__ import annotations

from longhaul.agent.middleware.base import Middleware
from longhaul.agent.run_context import pin_context
from longhaul.agent.turn import Turn
from longhaul.agent.workdir import trace_working_dir
from longhaul.domain.events import ModelParams


class TraceContext(Middleware):
    async def before_agent(self, turn: Turn) -> None:
        config = turn.state.config
        preset = turn.env.presets.get(config.preset)
        turn.preset = preset
        child = turn.state.parent_trace_id is not None
        turn.tools = preset.select_tools(turn.all_tools, config, child=child)
        if (
            "get_experience" in turn.tools
            and turn.state.context is None  # else the recorded context decides
            and not await turn.experience_pool()
        ):
            turn.tools = turn.tools.without(["get_experience"])
        # The trace's own list (POST /api/traces, agent(skills=…)) first, then the preset's,
        # then every skill.
        turn.skills = turn.env.skills.only(config.skills or preset.skills)
        turn.working_dir = trace_working_dir(turn.env.working_root, turn.state, config.working_dir)
        turn.max_iterations = (
            config.max_iterations or preset.max_iterations or turn.config.max_iterations
        )
        turn.temperature = (
            config.temperature if config.temperature is not None else (preset.temperature)
        )
        turn.model_params = (config.model_params or ModelParams()).over(preset.params())
        parts = [
            config.system_prompt or preset.system_prompt,
            f"Working directory: {turn.working_dir} (file tools take paths relative to it).",
        ]
        if "skill" in turn.tools:
            parts.append(turn.skills.render())
        turn.system_prompt = "\n\n".join(part for part in parts if part)
        await pin_context(turn)
