"""ToolErrorHandling (wrap_tool_call, outermost): an exception becomes a tool message.

A failing tool must never end the turn: the model reads what went wrong and adapts. Deliberate
refusals (:class:`ToolError`) keep their code; argument models that pydantic rejects are
``tool_call_invalid``; anything else is ``tool_error`` with the exception's type and text.
Events a failed tool had recorded are dropped: its effect did not happen.
"""

from __future__ import annotations

import logging

from longhaul.agent.contract import EffectNotRecorded, StaleState
from longhaul.agent.errors import ToolError
from longhaul.agent.invocation import ToolInvocation
from longhaul.agent.messages import failure
from longhaul.agent.middleware.base import Middleware, ToolHandler
from longhaul.agent.tools.result import ToolReply
from longhaul.agent.turn import Turn
from pydantic import ValidationError

log = logging.getLogger(__name__)


def _pydantic_details(exc: ValidationError) -> str:
    return "; ".join(
        f"{'.'.join(map(str, error['loc'])) or '(arguments)'}: {error['msg']}"
        for error in exc.errors()
    )


class ToolErrorHandling(Middleware):
    async def wrap_tool_call(
        self, turn: Turn, invocation: ToolInvocation, call_next: ToolHandler
    ) -> ToolReply:
        try:
            return await call_next(invocation)
        except (StaleState, EffectNotRecorded):
            raise  # the log's trouble, not the tool's: the turn ends
        except ToolError as exc:
            invocation.ctx.recorded.clear()
            return failure(exc.code, str(exc))
        except ValidationError as exc:
            invocation.ctx.recorded.clear()
            return failure("tool_call_invalid", _pydantic_details(exc))
        except Exception as exc:
            invocation.ctx.recorded.clear()
            log.warning("tool %s failed on trace %s", invocation.name, turn.trace_id, exc_info=True)
            return failure("tool_error", f"{invocation.name} raised {type(exc).__name__}: {exc}")
