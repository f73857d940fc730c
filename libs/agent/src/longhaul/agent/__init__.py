"""longhaul.agent: the pure ReAct engine (no NATS), its middleware, tools and presets.

engine = Engine(tools=builtin_tools(), config=pipeline_config, env=AgentEnv(...))
outcome = await engine.run_turn(state, sink, model=model, live=live)

Names load on first use (``_HOME`` says from where), so importing one light submodule does
not import the whole engine.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from longhaul.agent.lazy import lazy_getattr

if TYPE_CHECKING:
    from longhaul.agent.context_hooks import ContextHooks
    from longhaul.agent.contract import (
        EventSink,
        LiveCallback,
        LiveUpdate,
        StaleState,
        TurnEnd,
        TurnOutcome,
    )
    from longhaul.agent.engine import Engine, run_turn
    from longhaul.agent.env import AgentEnv
    from longhaul.agent.errors import ToolError
    from longhaul.agent.guardrail_policy import GuardrailPolicy
    from longhaul.agent.invocation import ToolInvocation
    from longhaul.agent.middleware import DEFAULT_ORDER, Middleware, default_middleware
    from longhaul.agent.presets import BUILTIN_PRESETS, Preset, PresetCatalog
    from longhaul.agent.skills import Skill, SkillIndex
    from longhaul.agent.tools import (
        Attachment,
        Deferred,
        Tool,
        ToolContext,
        ToolRegistry,
        ToolResult,
        ToolSettings,
        builtin_tools,
        tool,
    )
    from longhaul.agent.turn import Step, Turn
    from longhaul.agent.workspace import Workspace

_HOME = {
    "AgentEnv": "longhaul.agent.env",
    "Attachment": "longhaul.agent.tools",
    "BUILTIN_PRESETS": "longhaul.agent.presets",
    "ContextHooks": "longhaul.agent.context_hooks",
    "DEFAULT_ORDER": "longhaul.agent.middleware",
    "Deferred": "longhaul.agent.tools",
    "Engine": "longhaul.agent.engine",
    "EventSink": "longhaul.agent.contract",
    "GuardrailPolicy": "longhaul.agent.guardrail_policy",
    "LiveCallback": "longhaul.agent.contract",
    "LiveUpdate": "longhaul.agent.contract",
    "Middleware": "longhaul.agent.middleware",
    "Preset": "longhaul.agent.presets",
    "PresetCatalog": "longhaul.agent.presets",
    "Skill": "longhaul.agent.skills",
    "SkillIndex": "longhaul.agent.skills",
    "StaleState": "longhaul.agent.contract",
    "Step": "longhaul.agent.turn",
    "Tool": "longhaul.agent.tools",
    "ToolContext": "longhaul.agent.tools",
    "ToolError": "longhaul.agent.errors",
    "ToolInvocation": "longhaul.agent.invocation",
    "ToolRegistry": "longhaul.agent.tools",
    "ToolResult": "longhaul.agent.tools",
    "ToolSettings": "longhaul.agent.tools",
    "Turn": "longhaul.agent.turn",
    "TurnEnd": "longhaul.agent.contract",
    "TurnOutcome": "longhaul.agent.contract",
    "Workspace": "longhaul.agent.workspace",
    "builtin_tools": "longhaul.agent.tools",
    "default_middleware": "longhaul.agent.middleware",
    "run_turn": "longhaul.agent.engine",
    "tool": "longhaul.agent.tools",
}
__all__ = sorted(_HOME)

__getattr__ = lazy_getattr(__name__, _HOME)
