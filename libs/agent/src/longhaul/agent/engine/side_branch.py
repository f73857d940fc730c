"""A side branch: a small agent's messages in the trace's tree, off the main path.

Reflection (``engine.reflection``) and level-2 compaction (``engine.compaction``) each run a
few model rounds with the trace's read-only tools on such a branch: every message is
appended (so the work is on the log and in the viewer, and costs are counted) and chained
under the previous one, but the head never moves there, so the main path goes on where it
was whatever the branch does, even after a crash in the middle of it.
"""

from __future__ import annotations

from typing import Any, Literal

from longhaul.agent.accounting import charge
from longhaul.agent.images import with_images
from longhaul.agent.invocation import ToolInvocation
from longhaul.agent.messages import error_text
from longhaul.agent.middleware.base import ToolHandler
from longhaul.agent.tools.registry import ToolRegistry
from longhaul.agent.tools.result import ToolResult
from longhaul.agent.turn import Turn
from longhaul.domain.events import MessageAppended
from longhaul.llm.telemetry import traced_complete
from longhaul.llm.types import ChatMessage, ModelRequest, ModelResponse, ToolSpec


class SideBranch:
    """Messages chained off ``parent`` (default: the head), emitted one batch at a time;
    ``chat`` is what the branch's model sees, growing with each message."""

    def __init__(
        self,
        turn: Turn,
        branch_type: Literal["compression", "reflection"],
        chat: list[ChatMessage],
        *,
        parent: int | None = None,
    ) -> None:
        self.turn = turn
        self.branch_type = branch_type
        self.tail = parent
        self.chat = chat

    async def add(self, role: Any, **fields: Any) -> MessageAppended:
        batch = self.turn.batch()
        if self.tail is not None:  # else under the head, where the batch starts
            fields["parent"] = self.tail
        if self.branch_type == "compression":
            fields["side_branch"] = True
        message = batch.message(role, branch_type=self.branch_type, **fields)
        await self.turn.emit(batch)
        self.tail = message.sequence
        self.chat.append(message.to_openai())
        return message

    async def failed(self, what: str, exc: Exception) -> None:
        """End the branch with a note saying why (the work so far stays on the log)."""
        await self.add(
            "assistant", content=f"({what} failed: {exc})", synthetic=True, error_code="model_error"
        )

    async def call(
        self,
        model: Any,
        *,
        system: str,
        specs: list[ToolSpec] | None,
        purpose: str,
        schema: dict[str, Any] | None = None,
        temperature: float | None = None,
    ) -> ModelResponse:
        """One model round on the branch (tools offered only with ``specs``); the answer is
        appended with its usage and cost."""
        turn = self.turn
        request = ModelRequest(
            model=model.name,
            messages=list(self.chat),
            tools=specs or [],
            system_stable=system,
            temperature=temperature,
            response_schema=schema,
            metadata={"trace_id": turn.trace_id, "purpose": purpose},
        )
        response = await traced_complete(model, await with_images(request, turn))
        usage, cost = charge(model.name, request, response, turn.env.models)
        calls = list(response.tool_calls) if specs else []
        await self.add(
            "assistant",
            content=response.content if response.content or not calls else None,
            tool_calls=calls or None,
            usage=usage,
            cost=cost,
            model=response.model or model.name,
            finish_reason=response.finish_reason,
        )
        return response

    async def run_tools(
        self, response: ModelResponse, tools: ToolRegistry, call_tool: ToolHandler
    ) -> None:
        """Run the round's calls through the chain; a deferral (approval, sub-agent) is
        answered "not available" here."""
        turn = self.turn
        for call in response.tool_calls:
            tool = tools.get(call.name)
            invocation = ToolInvocation(call, tool, turn.tool_context(call.id, call.name))
            reply = await call_tool(invocation)
            if not isinstance(reply, ToolResult):
                reply = ToolResult(
                    output=error_text("not_available", "not available on a side branch"),
                    error_code="not_available",
                )
            await self.add(
                "tool",
                content=reply.output,
                tool_call_id=call.id,
                name=call.name,
                error_code=reply.error_code,
            )
