"""A stop cuts the model call short, never a tool call.

The shell (the executor) sets the turn's stop signal as soon as it hears of a stop request.
A model call only produces text, so cancelling it loses nothing that was recorded: its
streamed deltas were never events, and its HTTP connection is closed with the task. A tool
call is never cancelled here: it may be acting outside the process, and its result must be
recorded exactly once (the engine checks ``stop_requested`` after it, as before).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import NoReturn

from longhaul.agent.contract import StopSignalled
from longhaul.agent.turn import Turn
from longhaul.llm.types import ModelResponse


async def unless_stopped(turn: Turn, call: Callable[[], Awaitable[ModelResponse]]) -> ModelResponse:
    """``call()``, cancelled when the turn's stop signal is set first: then the append left
    in flight is settled (a tool's result stays recorded) and :class:`StopSignalled` ends the
    turn. A call that already returned keeps its response. The call runs in the turn's own
    task, which the signal cancels (:class:`StopSignal`): no task of its own."""
    signal = turn.stop_signal
    if signal is None:
        return await call()
    if signal.is_set():
        await _interrupted(turn)
    task = asyncio.current_task()
    assert task is not None
    signal.cutting(task)
    try:
        response = await call()
    except asyncio.CancelledError:
        # Our own cut, unless the turn was cancelled from outside as well.
        if not signal.cut_off() or task.uncancel() > 0:
            raise
        await _interrupted(turn)
    if signal.cut_off():  # the call swallowed the cut and answered: keep its answer
        task.uncancel()
    return response


async def _interrupted(turn: Turn) -> NoReturn:
    await turn.settle()
    raise StopSignalled(f"stop signalled for trace {turn.trace_id} during a model call")
