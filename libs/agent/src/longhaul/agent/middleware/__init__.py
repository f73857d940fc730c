"""The middleware chain and its thirteen built-ins (``DEFAULT_ORDER``, docs/08-engine.md)."""

from longhaul.agent.middleware.base import Middleware, ModelHandler, ToolHandler
from longhaul.agent.middleware.chain import MiddlewareChain
from longhaul.agent.middleware.clarification import Clarification
from longhaul.agent.middleware.context_injection import ContextInjection
from longhaul.agent.middleware.dangling import DanglingToolCall
from longhaul.agent.middleware.defaults import DEFAULT_ORDER, default_middleware
from longhaul.agent.middleware.framework import FRAMEWORK_LAYERS, with_framework_layers
from longhaul.agent.middleware.guardrail import Guardrail
from longhaul.agent.middleware.loop_detection import LoopDetection
from longhaul.agent.middleware.prompt_cache import PromptCache
from longhaul.agent.middleware.schema_validation import ToolSchemaValidation
from longhaul.agent.middleware.subagent_limit import SubagentLimit
from longhaul.agent.middleware.summarization import Summarization
from longhaul.agent.middleware.token_usage import TokenUsage
from longhaul.agent.middleware.tool_errors import ToolErrorHandling

__all__ = [
    "DEFAULT_ORDER",
    "FRAMEWORK_LAYERS",
    "Clarification",
    "ContextInjection",
    "DanglingToolCall",
    "Guardrail",
    "LoopDetection",
    "Middleware",
    "MiddlewareChain",
    "ModelHandler",
    "PromptCache",
    "SubagentLimit",
    "Summarization",
    "TokenUsage",
    "ToolErrorHandling",
    "ToolHandler",
    "ToolSchemaValidation",
    "default_middleware",
    "with_framework_layers",
]
