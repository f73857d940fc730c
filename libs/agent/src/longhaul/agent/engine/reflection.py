"""A requested reflection: one model call on a side branch.

The answer hangs off the head with ``branch_type="reflection"``: visible in the trace, never
on the main path the agent continues from. A failed call is recorded the same way (with
``error_code="model_error"``) so the request is consumed rather than retried forever.
"""

from __future__ import annotations

import logging

from longhaul.agent.accounting import charge
from longhaul.agent.turn import Turn
from longhaul.llm.telemetry import traced_complete
from longhaul.llm.types import ModelError, ModelRequest

log = logging.getLogger(__name__)

REFLECT = (
    "Pause and reflect on the work so far{focus}: what has been achieved, what went wrong or "
    "is uncertain, and what the best next steps are. Answer in prose; do not call tools."
)


async def reflect(turn: Turn) -> None:
    state = turn.state
    focus = f" (focus: {state.reflect_focus})" if state.reflect_focus else ""
    request = ModelRequest(
        model=turn.model.name,
        messages=[
            *turn.history.complete_messages(),
            {"role": "user", "content": REFLECT.format(focus=focus)},
        ],
        system_stable=turn.system_prompt,
        temperature=turn.temperature,
        metadata={"trace_id": turn.trace_id, "purpose": "reflection"},
    )
    batch = turn.batch()
    try:
        response = await traced_complete(turn.model, request)
    except ModelError as exc:
        log.warning("trace %s: reflection failed: %s", turn.trace_id, exc)
        batch.message(
            "assistant",
            content=f"(reflection failed: {exc})",
            branch_type="reflection",
            synthetic=True,
            error_code="model_error",
        )
    else:
        usage, cost = charge(turn.model.name, request, response, turn.env.models)
        batch.message(
            "assistant",
            content=response.content,
            branch_type="reflection",
            usage=usage,
            cost=cost,
            model=response.model or turn.model.name,
        )
    await turn.emit(batch)
