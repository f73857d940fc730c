"""longhaul.agent: the pure ReAct engine (no NATS), its middleware, tools and presets.

engine = Engine(tools=builtin_tools(), config=pipeline_config, env=AgentEnv(...))
outcome = await engine.run_turn(state, sink, model=model, live=live)
"""

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

__all__ = [
    "BUILTIN_PRESETS",
    "DEFAULT_ORDER",
    "AgentEnv",
    "Attachment",
    "ContextHooks",
    "Deferred",
    "Engine",
    "EventSink",
    "GuardrailPolicy",
    "LiveCallback",
    "LiveUpdate",
    "Middleware",
    "Preset",
    "PresetCatalog",
    "Skill",
    "SkillIndex",
    "StaleState",
    "Step",
    "Tool",
    "ToolContext",
    "ToolError",
    "ToolInvocation",
    "ToolRegistry",
    "ToolResult",
    "ToolSettings",
    "Turn",
    "TurnEnd",
    "TurnOutcome",
    "Workspace",
    "builtin_tools",
    "default_middleware",
    "run_turn",
    "tool",
]
