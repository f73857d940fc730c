"""Why a run stops early: the ``reason`` of a ``stopped`` event (middleware and the engine
both name them, so they live below both)."""

STOP_REQUESTED = "stop_requested"
MAX_ITERATIONS = "max_iterations"
MAX_TOKENS = "max_tokens"
MAX_COST = "max_cost"
BUDGET_REASONS = frozenset({MAX_ITERATIONS, MAX_TOKENS, MAX_COST})
STORAGE_FULL = "storage_full"
"""The event stream or object store reached its limit (``longhaul.core.storage``): the run
stops before its next model call and may be continued once there is room."""
