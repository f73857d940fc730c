"""Tool messages the harness writes itself, and the text of tool results."""

from __future__ import annotations

from longhaul.agent.batch import Batch
from longhaul.agent.tools.result import ToolResult
from longhaul.domain.events import MessageAppended
from longhaul.domain.messages import ToolCall
from longhaul.domain.state import TraceState


def error_text(code: str, message: str) -> str:
    return f"Error ({code}): {message}"


def failure(code: str, message: str) -> ToolResult:
    """A tool answer that reports a failure the model can act on."""
    return ToolResult(output=error_text(code, message), error_code=code)


def tool_message(
    batch: Batch,
    call: ToolCall,
    result: ToolResult,
    *,
    synthetic: bool = False,
    extra: str = "",
) -> MessageAppended:
    return batch.message(
        "tool",
        content=result.output + extra,
        tool_call_id=call.id,
        name=call.name,
        error_code=result.error_code,
        long_term_memory=result.long_term_memory,
        include_output_only_once=result.include_output_only_once,
        synthetic=synthetic,
    )


def unfinished(state: TraceState, call: ToolCall, code: str, why: str) -> ToolResult:
    """The answer for a call that will not get its real result (a crash, a stop).

    A call that already started sub-traces says which, and how to pick them up with
    ``continue_from``, so the children's work is not lost to the model.
    """
    name = call.function.name
    children = [info for info in state.subtraces.values() if info.tool_call_id == call.id]
    if children:
        listed = ", ".join(f"{info.child_trace_id} ({info.status})" for info in children)
        hint = (
            f"Sub-trace(s) {listed} were started for it; call {name} with "
            "continue_from=<sub-trace id> to continue one once it finished."
        )
    else:
        hint = f"Call {name} again if it is still needed."
    return failure(code, f"{why}. {hint}")
