"""Helpers for the llm tests: a registry per test, stream draining, sleep recording."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import pytest
from longhaul.llm import Model, ModelRegistry, ModelRequest, StreamEvent
from longhaul.llm.http_model import HttpModel


@pytest.fixture
async def registry() -> AsyncIterator[ModelRegistry]:
    async with ModelRegistry(env={}) as reg:
        yield reg


async def drain(model: Model, request: ModelRequest) -> list[StreamEvent]:
    return [event async for event in model.stream(request)]


@dataclass
class SleepRecorder:
    """Replaces a retry policy's sleep: records each delay, then really waits it."""

    delays: list[float] = field(default_factory=list)
    woke_at: list[float] = field(default_factory=list)

    async def __call__(self, delay: float) -> None:
        self.delays.append(delay)
        await asyncio.sleep(delay)
        self.woke_at.append(asyncio.get_running_loop().time())

    def install(self, model: Model) -> SleepRecorder:
        assert isinstance(model, HttpModel)
        model.endpoint.retry.sleep = self
        return self
