"""The innermost model handler: put back the images the events only name
(``longhaul.agent.images``), stream the response, forward deltas and retry notices, inside the
call's GenAI ``chat`` span (``longhaul.agent.telemetry``)."""

from __future__ import annotations

from collections.abc import AsyncGenerator
from contextlib import aclosing
from typing import cast

from longhaul.agent.contract import LiveUpdate
from longhaul.agent.engine.deltas import DeltaThrottle
from longhaul.agent.engine.fallback import attempt_failed
from longhaul.agent.images import with_images
from longhaul.agent.middleware.base import ModelHandler
from longhaul.agent.turn import Turn
from longhaul.llm.telemetry import model_span, record_response
from longhaul.llm.types import (
    ModelError,
    ModelRequest,
    ModelResponse,
    RetryNotice,
    StreamEnd,
    StreamEvent,
    TextDelta,
)


def streaming_call(turn: Turn) -> ModelHandler:
    async def call(request: ModelRequest) -> ModelResponse:
        with model_span(request) as span:
            response = await _call(turn, request)
            record_response(span, response)
            return response

    return call


async def _call(turn: Turn, request: ModelRequest) -> ModelResponse:
    request = await with_images(request, turn)  # images the events only name go in whole
    live = turn.live
    if live is None:
        return await turn.model.complete(request)
    throttle = DeltaThrottle(live, turn.config.streaming.flush_interval_ms, turn.env.clock)
    final: ModelResponse | None = None
    # every model streams from an async generator: closed at once if a retry ends the call
    stream = cast("AsyncGenerator[StreamEvent, None]", turn.model.stream(request))
    async with aclosing(stream) as events:
        async for event in events:
            if isinstance(event, TextDelta):
                await throttle.push(event.text)
            elif isinstance(event, RetryNotice):
                await throttle.flush()
                await attempt_failed(turn, event)
                await live(
                    LiveUpdate(
                        kind="retry",
                        text=f"attempt {event.attempt} in {event.delay_s:.1f}s: {event.reason}",
                    )
                )
            elif isinstance(event, StreamEnd):
                final = event.response
    await throttle.flush()
    if final is None:
        raise ModelError("model stream ended without a final response")
    return final
