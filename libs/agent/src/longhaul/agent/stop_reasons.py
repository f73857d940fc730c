"""Why a run stops early: the ``reason`` of a ``stopped`` event (middleware and the engine
both name them, so they live below both)."""

STOP_REQUESTED = "stop_requested"
MAX_ITERATIONS = "max_iterations"
MAX_TOKENS = "max_tokens"
MAX_COST = "max_cost"
BUDGET_REASONS = frozenset({MAX_ITERATIONS, MAX_TOKENS, MAX_COST})
