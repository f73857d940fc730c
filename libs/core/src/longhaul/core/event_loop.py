"""The event loop services and benches run on: uvloop where it is installed (Linux and macOS,
a declared dependency there), else asyncio's own.

uvloop's loop and transports are written in C: on the executor's hot path (an append round
trip, a model call and a tool call per step) it takes a quarter off the process's CPU per
step, and a step is mostly CPU on a loaded machine.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


def run(main: Coroutine[Any, Any, T]) -> T:
    """``asyncio.run(main)`` on the fastest loop available."""
    try:
        import uvloop
    except ImportError:
        return asyncio.run(main)
    return uvloop.run(main)
