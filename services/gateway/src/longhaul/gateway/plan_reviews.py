"""The tasks of a key whose plan waits for review, without folding every task per request.

Tasks have no index; the stream's subject counts say enough: a task whose ``plan_created``
events outnumber its ``plan_reviewed`` ones and that has not ended may wait for review (four
``stream_info`` requests, no payloads). Those candidates are folded once per change of their
counts (a task enters ``awaiting_review`` only with a ``plan_created`` and leaves it only with
a ``plan_reviewed`` or its end, so equal counts mean an equal answer) and kept if they belong
to the caller and are ``awaiting_review``.
"""

from __future__ import annotations

from longhaul.domain.state import TaskState
from longhaul.gateway.runtime import Runtime

_COUNTED = ("plan_created", "plan_reviewed", "task_completed", "task_failed")


class PlanReviews:
    """One per gateway: the folds of the candidate tasks, by the counts they were folded at."""

    def __init__(self) -> None:
        self._folded: dict[str, tuple[tuple[int, int], TaskState]] = {}

    async def awaiting(self, runtime: Runtime, owner: str) -> list[TaskState]:
        """The caller's tasks in ``awaiting_review``."""
        async with runtime.nats_call():
            created, reviewed, completed, failed = [
                await runtime.tasks.counts(event_type) for event_type in _COUNTED
            ]
            candidates = {
                task_id: (plans, reviewed.get(task_id, 0))
                for task_id, plans in created.items()
                if plans > reviewed.get(task_id, 0)
                and task_id not in completed
                and task_id not in failed
            }
            for task_id in set(self._folded) - set(candidates):
                del self._folded[task_id]
            for task_id, counts in candidates.items():
                known = self._folded.get(task_id)
                if known is None or known[0] != counts:
                    self._folded[task_id] = (counts, await runtime.tasks.load(task_id))
        return [
            state
            for _, state in self._folded.values()
            if state.owner == owner and state.status == "awaiting_review"
        ]
