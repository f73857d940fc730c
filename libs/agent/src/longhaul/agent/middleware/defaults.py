"""``default_middleware(config)``: the built-ins in docs/08-engine.md order, adjusted by
``PipelineConfig.middleware``, plus the operator's own middleware.

Each entry of that list names a built-in (``LoopDetection`` or ``loop_detection``) and may
switch it off. The enabled entries listed are re-ordered among themselves, in the slots they
occupy by default, so switching one off or swapping two never moves the others. The framework
layers (``DanglingToolCall``, ``ToolErrorHandling``, ``ToolApproval``: see ``framework``) are
pinned: listing one is allowed and changes nothing; switching one off is a config error. An
entry with ``use`` is an operator's middleware, placed by ``before``/``after`` (``operator``).
"""

from __future__ import annotations

import re

from longhaul.agent.guardrail_policy import GuardrailPolicy
from longhaul.agent.middleware import operator
from longhaul.agent.middleware.approval import ToolApproval
from longhaul.agent.middleware.base import Middleware
from longhaul.agent.middleware.clarification import Clarification
from longhaul.agent.middleware.context_injection import ContextInjection
from longhaul.agent.middleware.dangling import DanglingToolCall
from longhaul.agent.middleware.experience_recall import ExperienceRecall
from longhaul.agent.middleware.framework import FRAMEWORK_LAYERS, FRAMEWORK_NAMES
from longhaul.agent.middleware.guardrail import Guardrail
from longhaul.agent.middleware.loop_detection import LoopDetection
from longhaul.agent.middleware.operator import place
from longhaul.agent.middleware.prompt_cache import PromptCache
from longhaul.agent.middleware.schema_validation import ToolSchemaValidation
from longhaul.agent.middleware.subagent_limit import SubagentLimit
from longhaul.agent.middleware.summarization import ContextLimit, Summarization
from longhaul.agent.middleware.token_usage import TokenUsage
from longhaul.agent.middleware.tool_errors import ToolErrorHandling
from longhaul.domain.config import PipelineConfig

OUTER_NAMES = frozenset(layer.config_name() for layer in FRAMEWORK_LAYERS)

DEFAULT_ORDER = (
    "DanglingToolCall",
    "ToolErrorHandling",
    "ToolSchemaValidation",
    "Guardrail",
    "Summarization",
    "ContextInjection",
    "PromptCache",
    "TokenUsage",
    "SubagentLimit",
    "LoopDetection",
    "Clarification",
    "ExperienceRecall",
    "ToolApproval",
)


def normalise(name: str) -> str:
    """``loop_detection``, ``LoopDetection`` and ``loop-detection-middleware`` are one name."""
    key = re.sub(r"[^a-z]", "", name.lower())
    return key.removesuffix("middleware")


def default_middleware(
    config: PipelineConfig | None = None,
    *,
    guardrail: GuardrailPolicy | None = None,
    context_limit: ContextLimit | None = None,
) -> list[Middleware]:
    config = config or PipelineConfig()
    built: dict[str, Middleware] = {
        "ExperienceRecall": ExperienceRecall(),
        "DanglingToolCall": DanglingToolCall(),
        "ToolErrorHandling": ToolErrorHandling(),
        "ToolSchemaValidation": ToolSchemaValidation(),
        "Guardrail": Guardrail(guardrail or GuardrailPolicy.configured(config.guardrail)),
        "Summarization": Summarization(context_limit),
        "ContextInjection": ContextInjection(),
        "PromptCache": PromptCache(),
        "TokenUsage": TokenUsage(),
        "SubagentLimit": SubagentLimit(),
        "LoopDetection": LoopDetection(),
        "Clarification": Clarification(),
        "ToolApproval": ToolApproval(),
    }
    by_key = {normalise(name): name for name in DEFAULT_ORDER}
    order = list(DEFAULT_ORDER)
    disabled: set[str] = set()
    listed: list[str] = []
    builtin_entries = [entry for entry in config.middleware if entry.use is None]
    for entry in builtin_entries:
        if entry.before or entry.after or entry.options:
            raise ValueError(
                f"pipeline.middleware[{entry.name}]: before/after/options are for operator "
                "middleware (with use: module:Class); built-ins are reordered by listing them"
            )
        if normalise(entry.name) == "tracecontext":
            raise ValueError(
                "pipeline.middleware: TraceContext is no longer a middleware (the turn's "
                "settings are resolved before the chain runs); remove it from the list"
            )
        name = by_key.get(normalise(entry.name))
        if name is None:
            known = ", ".join(DEFAULT_ORDER)
            raise ValueError(f"pipeline.middleware: unknown middleware {entry.name!r} ({known})")
        if name in listed:
            raise ValueError(f"pipeline.middleware: {name} is listed twice")
        listed.append(name)
        if name in FRAMEWORK_NAMES:
            if not entry.enabled:
                raise ValueError(
                    f"pipeline.middleware: {name} is a framework layer and cannot be switched off"
                )
            continue  # pinned in its slot
        if not entry.enabled:
            disabled.add(name)
    moved = [name for name in listed if name not in disabled and name not in FRAMEWORK_NAMES]
    slots = sorted(order.index(name) for name in moved)
    for slot, name in zip(slots, moved, strict=True):
        order[slot] = name
    chain = [(name, built[name]) for name in order if name not in disabled]
    for entry in config.middleware:
        if entry.use is not None and entry.enabled:
            place(
                chain,
                entry,
                operator.build(entry),
                outer=frozenset(n for n in FRAMEWORK_NAMES if n in OUTER_NAMES),
                inner=frozenset(n for n in FRAMEWORK_NAMES if n not in OUTER_NAMES),
            )
    return [middleware for _, middleware in chain]
