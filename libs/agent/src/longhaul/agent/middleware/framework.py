"""The pinned ends of the chain: framework layers no configuration can remove.

Three built-ins are not features but what makes a turn safe to run at all: without
:class:`DanglingToolCall` a crash between a tool call and its result makes every later request
one that providers reject; without :class:`ToolErrorHandling` a failing tool ends the turn
instead of telling the model; without :class:`ToolApproval` a call a person was promised to
approve would just run. ``PipelineConfig.middleware`` may not switch them off or move them
(``default_middleware`` refuses), and a chain built from any list of middleware gets the
first two at its outer end and the approval gate at its inner end when the list lacks them
(:func:`with_framework_layers`), so the ends of every chain are the same.
"""

from __future__ import annotations

from collections.abc import Sequence

from longhaul.agent.middleware.approval import ToolApproval
from longhaul.agent.middleware.base import Middleware
from longhaul.agent.middleware.dangling import DanglingToolCall
from longhaul.agent.middleware.tool_errors import ToolErrorHandling

FRAMEWORK_LAYERS: tuple[type[Middleware], ...] = (DanglingToolCall, ToolErrorHandling)
"""Outermost first: healing precedes every other model-call wrapper, and tool errors are
caught around every other tool-call wrapper."""

INNER_FRAMEWORK_LAYERS: tuple[type[Middleware], ...] = (ToolApproval,)
"""Innermost: a call is gated after validation and the guardrail, right before it runs."""

FRAMEWORK_NAMES = frozenset(
    layer.config_name() for layer in (*FRAMEWORK_LAYERS, *INNER_FRAMEWORK_LAYERS)
)


def with_framework_layers(middleware: Sequence[Middleware]) -> list[Middleware]:
    """``middleware`` with each missing framework layer added at the outer end (a list that
    places them itself, like ``default_middleware``'s, is kept as it is)."""
    outer = [
        layer() for layer in FRAMEWORK_LAYERS if not any(isinstance(m, layer) for m in middleware)
    ]
    inner = [
        layer()
        for layer in INNER_FRAMEWORK_LAYERS
        if not any(isinstance(m, layer) for m in middleware)
    ]
    return [*outer, *middleware, *inner]
