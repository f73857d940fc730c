"""``answer_within``: an append's acknowledgement awaited with a timeout, as
``asyncio.wait_for`` would (the same answer, the same TimeoutError, the same cancellations)."""

from __future__ import annotations

import asyncio

import pytest
from longhaul.core.store import answer_within
from nats.js import api


async def test_the_answer_comes_through() -> None:
    future: asyncio.Future[api.PubAck] = asyncio.get_running_loop().create_future()
    ack = api.PubAck(stream="S", seq=7)
    asyncio.get_running_loop().call_soon(future.set_result, ack)
    assert await answer_within(future, 30) is ack


async def test_an_error_answer_is_raised() -> None:
    future: asyncio.Future[api.PubAck] = asyncio.get_running_loop().create_future()
    asyncio.get_running_loop().call_soon(future.set_exception, ValueError("refused"))
    with pytest.raises(ValueError, match="refused"):
        await answer_within(future, 30)


async def test_no_answer_in_time_is_a_timeout_and_the_future_is_cancelled() -> None:
    future: asyncio.Future[api.PubAck] = asyncio.get_running_loop().create_future()
    with pytest.raises(TimeoutError):
        await answer_within(future, 0.01)
    assert future.cancelled()


async def test_a_cancelled_caller_is_cancelled_not_timed_out() -> None:
    future: asyncio.Future[api.PubAck] = asyncio.get_running_loop().create_future()
    waiter = asyncio.create_task(answer_within(future, 30))
    await asyncio.sleep(0)  # the task is awaiting the future
    waiter.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiter
    assert future.cancelled()
