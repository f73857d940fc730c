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

from longhaul.agent.engine.side_branch import SideBranch
from longhaul.agent.middleware.base import ToolHandler
from longhaul.agent.turn import Turn
from longhaul.domain.experiences import MAX_CONTENT, Experience, make
from longhaul.llm.structured import extract_json, schema_errors
from longhaul.llm.types import ModelError, ModelResponse, ToolSpec

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


Reflected = tuple[list[str], str | None]
"""(experience ids recorded, why none were) of one reflection."""


async def reflect(turn: Turn, call_tool: ToolHandler) -> Reflected:
    state = turn.state
    categories = turn.env.memory.categories
    schema = experiences_schema(categories)
    tools = turn.tools.read_only()
    focus = f" (focus: {state.reflect_focus})" if state.reflect_focus else ""
    branch = SideBranch(turn, "reflection", turn.history.complete_messages())
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
            await branch.failed("reflection", exc)
            return [], f"reflection failed: {exc}"
        if response.tool_calls and not last:
            await branch.run_tools(response, tools, call_tool)
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
    turn: Turn, branch: SideBranch, specs: list[ToolSpec] | None, schema: dict[str, Any]
) -> ModelResponse:
    return await branch.call(
        turn.model,
        system=turn.system_prompt,
        specs=specs,
        purpose="reflection",
        schema=None if specs else schema,
        temperature=turn.temperature,
    )


def _parse(content: str, schema: dict[str, Any]) -> tuple[list[str], list[dict[str, Any]]]:
    try:
        value = extract_json(content)
    except ValueError as exc:
        return [str(exc)], []
    problems = schema_errors(value, schema)
    return problems, [] if problems else list(value["experiences"])


async def _record(
    turn: Turn, branch: SideBranch, items: list[dict[str, Any]], categories: Sequence[str]
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
