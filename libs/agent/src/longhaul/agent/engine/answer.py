"""How an assistant message ended, read from the main path: an answer the model finished, a
part cut at the output length limit (and the parts an answer continues), a filtered one.
Pure reads of the fold; ``engine.cut`` acts on them."""

from __future__ import annotations

from longhaul.domain.messages import content_text
from longhaul.domain.state import Message, TraceState


def ended(message: Message | None, reason: str) -> bool:
    return (
        message is not None
        and message.role == "assistant"
        and message.branch_type == "main"
        and not message.tool_calls
        and message.finish_reason == reason
    )


def is_filtered(message: Message | None) -> bool:
    """An answer the provider's content filter ended (Anthropic ``refusal``, Gemini safety)."""
    return ended(message, "content_filter")


def is_cut(message: Message | None) -> bool:
    """An assistant answer (no tool calls) the provider cut at the output length limit."""
    return ended(message, "length")


def _parent(state: TraceState, message: Message) -> Message | None:
    if message.parent_sequence is None:
        return None
    return state.messages.get(message.parent_sequence)


def cut_parts(state: TraceState, message: Message) -> list[Message]:
    """The cut parts ``message`` continues, oldest first (each followed by a prompt)."""
    parts: list[Message] = []
    prompt = _parent(state, message)
    while prompt is not None and prompt.role == "user" and prompt.synthetic:
        part = _parent(state, prompt)
        if part is None or not is_cut(part):
            break
        parts.append(part)
        prompt = _parent(state, part)
    parts.reverse()
    return parts


def whole_answer(state: TraceState, answer: Message) -> str:
    """The answer's text with every part it continues, joined as the model wrote them."""
    return "".join(content_text(m.content) for m in [*cut_parts(state, answer), answer])
