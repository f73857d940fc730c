"""Shared base of every model: ``complete`` is ``stream`` collected, so each provider writes
only its streaming path and both entry points behave identically."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import AsyncIterator

from longhaul.llm.types import ModelRequest, ModelResponse, StreamEvent, collect


class StreamingModel(ABC):
    name: str

    @abstractmethod
    def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]: ...

    async def complete(self, request: ModelRequest) -> ModelResponse:
        return await collect(self.stream(request))
