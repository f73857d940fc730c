"""``ask_human``: a question for the user.

The Clarification middleware turns the call into a wait for the reply. Without it (a batch
deployment that removed it), the tool answers that nobody is there, so the agent decides on
its own instead of hanging.
"""

from __future__ import annotations

from longhaul.agent.tools.base import tool


@tool(read_only=True)
async def ask_human(question: str) -> str:
    """Ask the user a question and wait for the reply. Use only when you cannot proceed
    responsibly without it.

    Args:
        question: the question, with the options you see if there are any.
    """
    return "No human is available in this run; proceed with your best judgement."
