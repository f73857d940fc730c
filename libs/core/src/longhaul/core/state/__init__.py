"""Pure state folds over the event log: no I/O, deterministic, snapshot-serialisable."""

from longhaul.core.state.errors import InvalidTransition
from longhaul.core.state.goals import GoalTree
from longhaul.core.state.task import PhaseState, TaskState, validate_phase_graph
from longhaul.core.state.trace import Message, SubtraceInfo, TraceState

__all__ = [
    "GoalTree",
    "InvalidTransition",
    "Message",
    "PhaseState",
    "SubtraceInfo",
    "TaskState",
    "TraceState",
    "validate_phase_graph",
]
