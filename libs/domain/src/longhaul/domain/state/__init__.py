"""Pure state folds over the event log: no I/O, deterministic, snapshot-serialisable."""

from longhaul.domain.state.errors import InvalidTransition
from longhaul.domain.state.fold import Fold
from longhaul.domain.state.goals import GoalTree
from longhaul.domain.state.schedule import ScheduleState
from longhaul.domain.state.task import PhaseState, TaskState, validate_phase_graph
from longhaul.domain.state.trace import Message, SubtraceInfo, TraceState

__all__ = [
    "Fold",
    "GoalTree",
    "InvalidTransition",
    "Message",
    "PhaseState",
    "ScheduleState",
    "SubtraceInfo",
    "TaskState",
    "TraceState",
    "validate_phase_graph",
]
