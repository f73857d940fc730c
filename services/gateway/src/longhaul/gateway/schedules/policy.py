"""What a schedule does with the ticks that are due: overlap and catch-up, as one pure step.

``catch_up`` chooses among ticks that were missed (no gateway ran, or a ``queue`` wait):
``none`` starts the latest only if it is at most ``GRACE_MS`` late, ``latest`` starts the
latest, ``all`` starts each in turn (``due`` holds at most ``MAX_CATCH_UP`` of them).
``overlap`` decides while the schedule's previous run is still going: ``skip`` passes the
ticks by, ``queue`` waits for it to end, ``allow`` starts anyway.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

Overlap = Literal["skip", "queue", "allow"]
CatchUp = Literal["none", "latest", "all"]

GRACE_MS = 60_000
"""A tick this late still counts as on time for ``catch_up: none`` (a restart, a slow loop)."""
MAX_CATCH_UP = 50
"""At most this many missed ticks are started by ``catch_up: all`` (the latest ones)."""


@dataclass(frozen=True)
class Step:
    fire: int | None
    """The tick to start a run for."""
    cursor: int | None
    """The schedule's next unhandled tick afterwards (``None``: no more)."""
    skipped: int = 0
    wait: bool = False
    """``queue``: leave everything as it is until the running one ends."""


def step(
    due: list[int],
    *,
    catch_up: CatchUp,
    overlap: Overlap,
    busy: bool,
    now: int,
    after: Callable[[int], int | None],
) -> Step:
    """One step over the non-empty ``due`` ticks (oldest first)."""
    if busy and overlap == "skip":
        return Step(None, after(due[-1]), skipped=len(due))
    if busy and overlap == "queue":
        return Step(None, None, wait=True)
    if catch_up == "all":
        return Step(due[0], after(due[0]))
    latest = due[-1]
    if catch_up == "none" and now - latest > GRACE_MS and overlap != "queue":
        return Step(None, after(latest), skipped=len(due))
    return Step(latest, after(latest), skipped=len(due) - 1)
