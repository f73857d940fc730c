"""Engine-only cost per step at 100 and 10,000 steps: does a step get dearer as history grows?

One turn of N model steps with the default middleware chain, an in-memory sink that applies
every event with the real fold (no I/O), and a zero-latency scripted model making one tool
call per step (arguments vary, so LoopDetection's window never fires; its per-tool frequency
limits are raised above N). A huge context limit keeps Summarization from triggering. The
only per-step work that must grow with history is building the request's message list (a
C-level copy, and freeing it after the call); a second, instrumented variant hands the model
the cached list itself to show that everything else stays flat.

    python bench/bench_engine.py [--quick]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make ``bench.common`` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from longhaul.agent import AgentEnv, Engine, ToolRegistry, default_middleware, tool
from longhaul.agent.history import History
from longhaul.core import events as ev
from longhaul.core.config import LoopDetectionConfig, PipelineConfig
from longhaul.core.state import TraceState
from longhaul.llm.scripted import ScriptedModel
from longhaul.llm.types import ModelRequest, ModelResponse, ToolCall, Usage

from bench.common import report


@tool
async def note(index: int) -> str:
    """Record a step (no I/O).

    Args:
        index: the step number.
    """
    return f"noted {index}"


class FoldingSink:
    """The executor's sink minus the log: apply each event to the turn's state."""

    def __init__(self, state: TraceState) -> None:
        self.state = state

    async def emit(self, events: Sequence[ev.TraceEvent]) -> None:
        for event in events:
            event.aggregate_id = self.state.trace_id
            self.state.apply(event)


def script(steps: int) -> Callable[[ModelRequest], ModelResponse]:
    """O(1) per call: explicit call ids and usage, so the model itself never scans history."""
    counter = iter(range(steps + 1))
    usage = Usage(prompt_tokens=100, completion_tokens=10)

    def turn(request: ModelRequest) -> ModelResponse:
        index = next(counter)
        if index == steps:
            return ModelResponse(content="done", usage=usage)
        call = ToolCall(id=f"call_{index}", name="note", arguments=f'{{"index": {index}}}')
        return ModelResponse(tool_calls=[call], usage=usage)

    return turn


def new_trace() -> TraceState:
    state = TraceState()
    state.apply(
        ev.TraceCreated(
            aggregate_id="t_bench",
            messages=[ev.InputMessage(role="user", content="count to a large number")],
        )
    )
    return state


async def run_turn(steps: int, workdir: Path, **overrides: Any) -> float:
    """Seconds per step of one turn of ``steps`` tool steps plus the final answer."""
    config = PipelineConfig(
        max_iterations=steps + 1,
        loop_detection=LoopDetectionConfig(tool_freq_warn=10**9, tool_freq_stop=10**9),
        **overrides,
    )
    engine = Engine(
        tools=ToolRegistry([note]),
        config=config,
        env=AgentEnv(working_root=workdir),
        middleware=default_middleware(config, context_limit=lambda model: 10**12),
    )
    model = ScriptedModel(script(steps), name="scripted:bench")
    state = new_trace()
    sink = FoldingSink(state)
    gc.collect()
    started = time.perf_counter()
    outcome = await engine.run_turn(state, sink, model=model)
    elapsed = time.perf_counter() - started
    assert outcome.end == "completed" and outcome.steps == steps + 1, outcome
    return elapsed / (steps + 1)


@contextlib.contextmanager
def uncopied_requests() -> Iterator[None]:
    """Instrumented variant: requests get History's own list instead of a copy, to isolate
    everything else a step costs. Only for measuring (a middleware that appends to the
    request would then write into the cache; ContextInjection is off in this variant)."""
    original = History.messages

    def shared(self: History) -> list[dict[str, Any]]:
        self.sync()
        return self._dicts

    History.messages = shared  # type: ignore[method-assign]
    try:
        yield
    finally:
        History.messages = original  # type: ignore[method-assign]


async def per_step(steps: int, workdir: Path, repeats: int, **config: Any) -> float:
    return min([await run_turn(steps, workdir, **config) for _ in range(repeats)])


async def main(quick: bool) -> None:
    small, large = (100, 2_000) if quick else (100, 10_000)
    workdir = Path.cwd()
    small_s = await per_step(small, workdir, 7)
    large_s = await per_step(large, workdir, 2)
    with uncopied_requests():
        bare_small = await per_step(small, workdir, 7, context_injection_every=0)
        bare_large = await per_step(large, workdir, 2, context_injection_every=0)
    rows = [
        ["default chain", small_s * 1e6, large_s * 1e6, large_s / small_s],
        ["without the request-list copy", bare_small * 1e6, bare_large * 1e6,
         bare_large / bare_small],
    ]  # fmt: skip
    report(
        "engine: cost per step (µs)",
        ["variant", f"{small} steps", f"{large} steps", "ratio"],
        rows,
        notes=[
            "Each step copies the request's message list (O(history), done in C); the second "
            "row hands the model History's own list instead, isolating the rest of a step.",
        ],
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true")
    asyncio.run(main(parser.parse_args().quick))
