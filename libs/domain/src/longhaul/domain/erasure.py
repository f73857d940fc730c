"""What the gateway asks the executors when a trace or task is erased (core NATS request on
``Names.erasures``): remove the working directory it worked in.

A request, not an event — nothing is persisted, there is nothing left to record it on. The
directory is on the executors' disks, which the gateway cannot reach; every executor
subscribed removes its copy and answers.
"""

from __future__ import annotations

import msgspec


class WorkdirErasure(msgspec.Struct, kw_only=True):
    owner: str
    """The API key's owner id (``k_…``) whose directory holds it."""
    scope: str | None = None
    """The top-most trace's id, or the task's id for a task's step traces; ``None``: the
    key's whole directory (its data erased)."""


class WorkdirErased(msgspec.Struct, kw_only=True):
    removed: bool
    """Whether the directory existed (False: already gone, or never created here)."""
