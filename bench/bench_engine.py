"""Engine-only cost per step at 100, 1,000 and 10,000 steps: does a step get dearer as history
grows?

One turn of N model steps with the default middleware chain, an in-memory sink that applies
every event with the real fold (no I/O), and a zero-latency scripted model making one tool
call per step (arguments vary, so LoopDetection's window never fires; its per-tool frequency
limits are raised above N). A huge context limit keeps Summarization from triggering; the
context reminder is on (every 10 steps, the default). The request's messages are a read-only
view shared with ``History`` (no per-step copy), so nothing a step does should grow with
history: the ratio column should stay near 1. The second row makes every tool result a
one-time output (``include_output_only_once``, as ``read`` does), the one case where History
rewrites an entry a request already showed.

    python bench/bench_engine.py [--quick]
"""

from __future__ import annotations

import argparse
import gc
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make ``bench.common`` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from longhaul.agent import AgentEnv, Engine, ToolRegistry, ToolResult, default_middleware, tool
from longhaul.core import event_loop
from longhaul.domain import events as ev
from longhaul.domain.config import LoopDetectionConfig, PipelineConfig
from longhaul.domain.state import TraceState
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


@tool(name="note")
async def note_once(index: int) -> ToolResult:
    """Record a step; the output is shown once, then only its memory (no I/O).

    Args:
        index: the step number.
    """
    return ToolResult(
        output=f"noted {index} in full",
        long_term_memory=f"noted {index}",
        include_output_only_once=True,
    )


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
        call = ToolCall.of(id=f"call_{index}", name="note", arguments=f'{{"index": {index}}}')
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


async def run_turn(steps: int, workdir: Path, once: bool = False) -> float:
    """Seconds per step of one turn of ``steps`` tool steps plus the final answer."""
    config = PipelineConfig(
        max_iterations=steps + 1,
        loop_detection=LoopDetectionConfig(tool_freq_warn=10**9, tool_freq_stop=10**9),
    )
    engine = Engine(
        tools=ToolRegistry([note_once if once else note]),
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


async def per_step(steps: int, workdir: Path, repeats: int, once: bool = False) -> float:
    return min([await run_turn(steps, workdir, once) for _ in range(repeats)])


async def main(quick: bool) -> None:
    sizes = (100, 500, 2_000) if quick else (100, 1_000, 10_000)
    repeats = {sizes[0]: 7, sizes[1]: 3, sizes[2]: 2}
    workdir = Path.cwd()
    rows: list[list[object]] = []
    for label, once in (("default chain", False), ("every result shown once", True)):
        costs = [await per_step(n, workdir, repeats[n], once) for n in sizes]
        rows.append([label, *(cost * 1e6 for cost in costs), costs[-1] / costs[0]])
    report(
        "engine: cost per step (µs)",
        ["variant", *(f"{n} steps" for n in sizes), f"ratio {sizes[-1]}/{sizes[0]}"],
        rows,
        notes=[
            "Requests share History's list through a read-only view (no per-step copy); the "
            "second row's tool results are one-time outputs, rewritten to their memory after "
            "the next assistant message.",
        ],
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true")
    event_loop.run(main(parser.parse_args().quick))
