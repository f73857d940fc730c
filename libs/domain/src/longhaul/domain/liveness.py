"""What a supervisor says when a child process dies (core NATS, ``Names.process_exits``).

A notice, not an event: nothing is persisted. Its point is speed — peers release the dead
incarnation's leases at once instead of waiting for their TTL — so losing one costs only that
wait (a restarted process releases its predecessor's leases itself, the TTL covers the rest).
The supervisor also records the death in ``lh_leases`` under :func:`dead_key` for a minute, for
a successor that was not listening yet when the notice went out.
"""

from __future__ import annotations

import msgspec


class ProcessExited(msgspec.Struct, kw_only=True):
    service: str
    """``executor``, ``planner``, ``verifier``, ``gateway``."""
    id: str
    """The service id its leases name (``LONGHAUL_EXECUTOR_ID`` for an executor)."""
    incarnation: str
    code: int | None = None


DEAD_RECORD_TTL_S = 60


def dead_key(incarnation: str) -> str:
    """``lh_leases`` key recording that ``incarnation`` died."""
    return f"dead.{incarnation}"
