"""longhaul.llm: one streaming model interface over OpenAI-compatible, Anthropic, Gemini and
offline scripted providers, with retries, limits, pricing and cross-provider history."""

from longhaul.llm.arguments import InvalidToolArguments, parse_arguments
from longhaul.llm.ids import prepare_history, rewrite_tool_call_ids
from longhaul.llm.pricing import context_limit, cost, price_for
from longhaul.llm.registry import (
    MissingApiKeyError,
    ModelRegistry,
    UnknownProviderError,
    close,
    resolve_model,
)
from longhaul.llm.scripted import ScriptedModel
from longhaul.llm.types import (
    ChatMessage,
    Model,
    ModelError,
    ModelRequest,
    ModelResponse,
    RetryNotice,
    StreamEnd,
    StreamEvent,
    TextDelta,
    ToolCall,
    ToolCallDelta,
    ToolSpec,
    Usage,
    collect,
)

__all__ = [
    "ChatMessage",
    "InvalidToolArguments",
    "MissingApiKeyError",
    "Model",
    "ModelError",
    "ModelRegistry",
    "ModelRequest",
    "ModelResponse",
    "RetryNotice",
    "ScriptedModel",
    "StreamEnd",
    "StreamEvent",
    "TextDelta",
    "ToolCall",
    "ToolCallDelta",
    "ToolSpec",
    "UnknownProviderError",
    "Usage",
    "close",
    "collect",
    "context_limit",
    "cost",
    "parse_arguments",
    "prepare_history",
    "price_for",
    "resolve_model",
    "rewrite_tool_call_ids",
]
