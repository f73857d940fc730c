"""A trace's ``output_schema``: the final answer must be JSON matching it.

The schema reaches the provider with every request (``Turn.request``), but no provider
guarantees it, so the answer is checked here with the validator for schemas a client wrote
(``longhaul.llm.structured``, as the verifier's ``json_schema`` check): nothing fetched,
patterns in linear time. An answer that does not match gets the errors back as a synthetic
user message, at most :data:`REPAIRS` times in a row, counted on the main path (answer ←
prompt ← answer …) so a crash or a takeover hands out no fresh ones; then the run fails
``invalid_output``.
"""

from __future__ import annotations

from typing import Any

from longhaul.agent.turn import Turn
from longhaul.domain.messages import content_text
from longhaul.domain.state import Message
from longhaul.llm.structured import extract_json, schema_errors
from longhaul.llm.untrusted_schema import UntrustedSchemaError

INVALID_OUTPUT = "invalid_output"
REPAIRS = 2
REPAIR_PROMPT = "Your answer does not match the required JSON schema:"


def output_problems(text: str, schema: dict[str, Any]) -> list[str]:
    """Why ``text`` is not JSON matching ``schema`` (empty: it is)."""
    try:
        value = extract_json(text)
    except ValueError as exc:
        return [f"the answer is {exc}"]
    try:
        return schema_errors(value, schema)
    except UntrustedSchemaError as exc:
        return [f"the output schema cannot be used: {exc}"]


def _repairs(turn: Turn, answer: Message) -> int:
    """Repair prompts already answered just before ``answer``."""
    messages, count = turn.state.messages, 0
    prompt = messages.get(answer.parent_sequence) if answer.parent_sequence is not None else None
    while (
        prompt is not None
        and prompt.role == "user"
        and prompt.synthetic
        and content_text(prompt.content).startswith(REPAIR_PROMPT)
    ):
        count += 1
        previous = messages.get(prompt.parent_sequence) if prompt.parent_sequence else None
        if previous is None or previous.parent_sequence is None:
            break
        prompt = messages.get(previous.parent_sequence)
    return count


async def ask_for_repair(turn: Turn, answer: Message, problems: list[str]) -> bool:
    """Send the problems back to the model; False once the repairs are used up."""
    if _repairs(turn, answer) >= REPAIRS:
        return False
    text = REPAIR_PROMPT + "\n- " + "\n- ".join(problems) + "\nAnswer again with only the JSON."
    batch = turn.batch()
    batch.message("user", content=text, synthetic=True)
    await turn.emit(batch)
    return True
