"""PromptCache (wrap_model_call): the system prompt as a stable block plus a volatile one.

Providers cache prompt prefixes; the stable block (preset prompt, working directory, skills)
is byte-identical across a trace's steps, and everything that changes per step (the time,
recalled memory) goes into ``system_volatile`` after it. Anthropic marks the stable block
with ``cache_control``; other providers get one string with the stable prefix first. With
``prompt_cache.enable`` off, both are sent as one uncached block.
"""

from __future__ import annotations

import msgspec
from longhaul.agent.middleware.base import Middleware, ModelHandler
from longhaul.agent.turn import Turn
from longhaul.llm.types import ModelRequest, ModelResponse


class PromptCache(Middleware):
    async def wrap_model_call(
        self, turn: Turn, request: ModelRequest, call_next: ModelHandler
    ) -> ModelResponse:
        now = turn.env.now().strftime("%Y-%m-%d %H:%M UTC")
        volatile = "\n\n".join([f"Current time: {now}", *turn.memory])
        if turn.config.prompt_cache.enable:
            request = msgspec.structs.replace(request, system_volatile=volatile, cache_system=True)
        else:
            stable = "\n\n".join(p for p in (request.system_stable, volatile) if p)
            request = msgspec.structs.replace(
                request, system_stable=stable, system_volatile="", cache_system=False
            )
        return await call_next(request)
