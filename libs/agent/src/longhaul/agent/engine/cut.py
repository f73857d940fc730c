"""Answers the model did not finish: cut at the output length limit, or ended by a filter.

A ``length`` ending without tool calls is never a final answer: the engine asks the model to
continue (a synthetic user message under the cut part) up to ``pipeline.max_continuations``
times, and the final answer is the parts joined; still cut → ``Failed(truncated)``. The rounds
are counted on the main path (cut part ← prompt ← cut part …), never in memory, so a crash or
a takeover hands out no fresh ones. A tool call cut mid-arguments is answered with a
``truncated`` tool error and never runs. A ``content_filter`` ending (Anthropic ``refusal``,
Gemini safety) fails the run with that reason: a filtered fragment is no answer.
"""

from __future__ import annotations

from longhaul.agent.contract import TurnOutcome
from longhaul.agent.engine.answer import cut_parts, is_cut, is_filtered
from longhaul.agent.engine.endings import fail
from longhaul.agent.messages import failure
from longhaul.agent.turn import Step, Turn
from longhaul.domain.state import Message

TRUNCATED = "truncated"
CONTENT_FILTER = "content_filter"
CONTINUE_PROMPT = (
    "Your previous message was cut off at the output length limit. Continue exactly where it "
    "stopped, without repeating anything already written."
)


async def unfinished_answer(turn: Turn, head: Message | None) -> TurnOutcome | None:
    """At the head of a step: a filtered answer fails the run; a cut one gets a continuation
    prompt (the step goes on to the model) or, out of rounds, fails ``truncated``."""
    if is_filtered(head):
        return await fail(
            turn, "the provider's content filter ended the model's answer", CONTENT_FILTER
        )
    if head is None or not is_cut(head):
        return None
    asked = len(cut_parts(turn.state, head))
    if asked >= turn.max_continuations:
        return await fail(
            turn,
            f"the answer was still cut off at the output length limit after {asked} "
            "continuation(s)",
            TRUNCATED,
        )
    batch = turn.batch()
    batch.message("user", content=CONTINUE_PROMPT, synthetic=True)
    await turn.emit(batch)
    return None


def refuse_cut_call(step: Step) -> None:
    """A response cut at the length limit ends inside its last tool call's arguments: that call
    is answered with a tool error, never run (the calls before it are whole)."""
    if step.response.finish_reason != "length" or not step.calls:
        return
    last = step.calls[-1]
    step.answered.setdefault(
        last.id,
        failure(
            TRUNCATED,
            f"the call to {last.name} was cut off at the output length limit in the middle of "
            "its arguments and was not run; call it again with shorter arguments (e.g. write "
            "a long file in parts)",
        ),
    )
