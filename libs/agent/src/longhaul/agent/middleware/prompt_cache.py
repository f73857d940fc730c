"""PromptCache (wrap_model_call): a stable system prompt, and volatile context after it all.

Providers cache prompt prefixes (tools → system → messages); the stable system prompt (preset
prompt, working directory, skills) is byte-identical across a trace's steps and runs, and what
changes (the time, to the hour; recalled memory; the unread-messages note) goes into
``system_volatile``, which every codec places after the conversation
(``longhaul.llm.prompt.context_note``), so it never invalidates the cached history. Anthropic
gets rolling ``cache_control`` breakpoints (tools, system, the last two user turns); OpenAI a
per-trace ``prompt_cache_key``. With ``prompt_cache.enable`` off, everything is sent as one
uncached system prompt.
"""

from __future__ import annotations

import msgspec
from longhaul.agent.middleware.base import Middleware, ModelHandler
from longhaul.agent.tools.messaging import inbox_note
from longhaul.agent.turn import Turn
from longhaul.llm.types import ModelRequest, ModelResponse


class PromptCache(Middleware):
    async def wrap_model_call(
        self, turn: Turn, request: ModelRequest, call_next: ModelHandler
    ) -> ModelResponse:
        now = turn.env.now()  # to the hour: a stable note (fields, not strftime: every step)
        hour = f"{now.year:04d}-{now.month:02d}-{now.day:02d} {now.hour:02d}:00 UTC"
        inbox = inbox_note(turn.state)
        volatile = "\n\n".join([f"Current time: {hour}", *turn.memory, *([inbox] if inbox else [])])
        if turn.config.prompt_cache.enable:
            request = msgspec.structs.replace(request, system_volatile=volatile, cache_system=True)
        else:
            stable = "\n\n".join(p for p in (request.system_stable, volatile) if p)
            request = msgspec.structs.replace(
                request, system_stable=stable, system_volatile="", cache_system=False
            )
        return await call_next(request)
