"""A requested reflection: a small agent on a side branch that ends in experiences.

``POST /api/traces/{id}/reflect {focus?}`` puts a reflection prompt (with the focus) on a
branch off the head (``branch_type="reflection"``: visible in the trace, never on the main
path the agent continues from) and runs up to :data:`MAX_TURNS` model calls there with the
trace's read-only tools; the last one must answer JSON matching :func:`experiences_schema`.
An invalid answer is sent back with the errors once (one repair round). Each experience is
recorded for the trace's key with ``helpful: 1`` and ``trace_id`` = this trace; a closing
note on the branch names their ids. A failed call ends the branch with an error note, so the
request is consumed rather than retried forever. :func:`reflect` returns the ids it recorded
and, when it recorded none, why (``memory.capture_on_completion`` puts both on the log).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from longhaul.agent.accounting import charge
from longhaul.agent.images import with_images
from longhaul.agent.invocation import ToolInvocation
from longhaul.agent.messages import error_text
from longhaul.agent.middleware.base import ToolHandler
from longhaul.agent.tools.registry import ToolRegistry
from longhaul.agent.tools.result import ToolResult
from longhaul.agent.turn import Turn
from longhaul.domain.events import MessageAppended
from longhaul.domain.experiences import MAX_CONTENT, Experience, make
from longhaul.llm.structured import extract_json, schema_errors
from longhaul.llm.telemetry import traced_complete
from longhaul.llm.types import ChatMessage, ModelError, ModelRequest, ModelResponse, ToolSpec

log = logging.getLogger(__name__)

MAX_TURNS = 5
MAX_EXPERIENCES = 5
REFLECT = (
    "Pause and reflect on the work so far{focus}. What would help a future run of a similar "
    "task: a tool that worked or misled, a step that was missing, a fact about the "
    "environment? You may check facts with the read-only tools (you have {turns} model "
    "turns in all). Then answer with JSON only:\n"
    '{{"experiences": [{{"category": "<one of: {categories}>", '
    '"tags": {{"intent": ["<what the task wants, snake_case>"], "state": ["<the situation>"]}}, '
    '"content": "When <condition>, <do this>, because <evidence from this run>."}}]}}\n'
    "At most {limit} experiences; an empty list if nothing is worth keeping."
)
REPAIR = "Your answer is not valid:\n- {errors}\nAnswer again with only the corrected JSON."


def experiences_schema(categories: Sequence[str]) -> dict[str, Any]:
    tags = {"type": "array", "items": {"type": "string", "minLength": 1}, "maxItems": 8}
    return {
        "type": "object",
        "properties": {
            "experiences": {
                "type": "array",
                "maxItems": MAX_EXPERIENCES,
                "items": {
                    "type": "object",
                    "properties": {
                        "category": {"enum": list(categories)},
                        "tags": {
                            "type": "object",
                            "properties": {"intent": tags, "state": tags},
                            "additionalProperties": False,
                        },
                        "content": {
                            "type": "string",
                            "pattern": "[^ \t\n\r\f\v]",
                            "maxLength": MAX_CONTENT,
                        },
                    },
                    "required": ["category", "content"],
                    "additionalProperties": False,
                },
            }
        },
        "required": ["experiences"],
        "additionalProperties": False,
    }


class _Branch:
    """The reflection branch: messages chained off the head, emitted one batch at a time."""

    def __init__(self, turn: Turn) -> None:
        self.turn = turn
        self.tail: int | None = None
        self.chat: list[ChatMessage] = turn.history.complete_messages()

    async def add(self, role: Any, **fields: Any) -> MessageAppended:
        batch = self.turn.batch()
        if self.tail is not None:  # else under the head, where the batch starts
            fields["parent"] = self.tail
        message = batch.message(role, branch_type="reflection", **fields)
        await self.turn.emit(batch)
        self.tail = message.sequence
        self.chat.append(message.to_openai())
        return message


Reflected = tuple[list[str], str | None]
"""(experience ids recorded, why none were) of one reflection."""


async def reflect(turn: Turn, call_tool: ToolHandler) -> Reflected:
    state = turn.state
    categories = turn.env.memory.categories
    schema = experiences_schema(categories)
    tools = turn.tools.read_only()
    focus = f" (focus: {state.reflect_focus})" if state.reflect_focus else ""
    branch = _Branch(turn)
    await branch.add(
        "user",
        content=REFLECT.format(
            focus=focus,
            turns=MAX_TURNS,
            categories=", ".join(categories),
            limit=MAX_EXPERIENCES,
        ),
        synthetic=True,
    )
    repaired = False
    for number in range(1, MAX_TURNS + 1):
        last = number == MAX_TURNS or repaired
        try:
            response = await _call(turn, branch, None if last else tools.specs(), schema)
        except ModelError as exc:
            log.warning("trace %s: reflection failed: %s", turn.trace_id, exc)
            await branch.add(
                "assistant",
                content=f"(reflection failed: {exc})",
                synthetic=True,
                error_code="model_error",
            )
            return [], f"reflection failed: {exc}"
        if response.tool_calls and not last:
            await _run_tools(turn, branch, response, tools, call_tool)
            continue
        problems, items = _parse(response.content, schema)
        if not problems:
            return await _record(turn, branch, items, categories)
        if repaired or number == MAX_TURNS:
            why = "reflection gave no valid experiences: " + "; ".join(problems)
            await branch.add(
                "assistant", content=f"({why})", synthetic=True, error_code="invalid_output"
            )
            return [], why
        repaired = True
        await branch.add(
            "user", content=REPAIR.format(errors="\n- ".join(problems)), synthetic=True
        )
    return [], "reflection ran out of model turns"


async def _call(
    turn: Turn, branch: _Branch, specs: list[ToolSpec] | None, schema: dict[str, Any]
) -> ModelResponse:
    request = ModelRequest(
        model=turn.model.name,
        messages=list(branch.chat),
        tools=specs or [],
        system_stable=turn.system_prompt,
        temperature=turn.temperature,
        response_schema=None if specs else schema,
        metadata={"trace_id": turn.trace_id, "purpose": "reflection"},
    )
    response = await traced_complete(turn.model, await with_images(request, turn))
    usage, cost = charge(turn.model.name, request, response, turn.env.models)
    calls = list(response.tool_calls) if specs else []
    await branch.add(
        "assistant",
        content=response.content if response.content or not calls else None,
        tool_calls=calls or None,
        usage=usage,
        cost=cost,
        model=response.model or turn.model.name,
        finish_reason=response.finish_reason,
    )
    return response


async def _run_tools(
    turn: Turn,
    branch: _Branch,
    response: ModelResponse,
    tools: ToolRegistry,
    call_tool: ToolHandler,
) -> None:
    for call in response.tool_calls:
        tool = tools.get(call.name)
        invocation = ToolInvocation(call, tool, turn.tool_context(call.id, call.name))
        reply = await call_tool(invocation)
        if not isinstance(reply, ToolResult):  # a deferral (approval, sub-agent): not here
            reply = ToolResult(
                output=error_text("not_available", "not available while reflecting"),
                error_code="not_available",
            )
        await branch.add(
            "tool",
            content=reply.output,
            tool_call_id=call.id,
            name=call.name,
            error_code=reply.error_code,
        )


def _parse(content: str, schema: dict[str, Any]) -> tuple[list[str], list[dict[str, Any]]]:
    try:
        value = extract_json(content)
    except ValueError as exc:
        return [str(exc)], []
    problems = schema_errors(value, schema)
    return problems, [] if problems else list(value["experiences"])


async def _record(
    turn: Turn, branch: _Branch, items: list[dict[str, Any]], categories: Sequence[str]
) -> Reflected:
    made: list[Experience] = [
        make(
            category=item["category"],
            content=item["content"],
            categories=categories,
            intent=item.get("tags", {}).get("intent", ()),
            state=item.get("tags", {}).get("state", ()),
            trace_id=turn.trace_id,
            helpful=1,
        )
        for item in items
    ]
    book = turn.env.experiences
    if book is None:
        await branch.add(
            "assistant", content="(no experience store: nothing recorded)", synthetic=True
        )
        return [], "no experience store"
    await book.record(turn.state.owner, made)
    ids = [e.id for e in made]
    note = "Recorded experiences: " + (", ".join(ids) or "none")
    await branch.add("assistant", content=note, synthetic=True)
    return ids, None
