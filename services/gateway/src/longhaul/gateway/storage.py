"""The gateway's side of full storage: 507 for new runs, and the figures ``/readyz`` and
``/metrics`` show (``longhaul.core.storage``).

Only what *starts* work is refused — a new trace, task or run, a continuation of an ended
trace. What frees room (``DELETE``) and what finishes work already under way (a reply, a stop)
still goes through; a write JetStream refuses anyway answers 507 too, never a 5xx.
"""

from __future__ import annotations

from longhaul.core.storage import StorageStatus
from longhaul.gateway.errors import ApiError
from longhaul.gateway.runtime import Runtime


async def require_room(runtime: Runtime) -> None:
    """507 when a store is full."""
    async with runtime.nats_call():
        reason = await runtime.service.storage.full()
    if reason is not None:
        raise ApiError.insufficient_storage(f"no room for a new run: {reason}")


def readiness(status: StorageStatus) -> str:
    """``ok``, or why nothing new may start."""
    return "ok" if status.full is None else f"full: {status.full}"
