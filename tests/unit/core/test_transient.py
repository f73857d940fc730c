"""Broker trouble is retried in place and never mistaken for a poison event."""

from __future__ import annotations

import nats.errors
import nats.js.errors
import pytest
from longhaul.core.transient import BrokerUnavailable, is_transient, retry_transient
from longhaul.domain.state import InvalidTransition


@pytest.mark.parametrize(
    "exc",
    [
        nats.errors.TimeoutError(),
        nats.errors.NoRespondersError(),
        nats.js.errors.NoStreamResponseError(),
        nats.js.errors.ServiceUnavailableError(code=503, description="no leader"),
        nats.js.errors.APIError(code=500, err_code=10008, description="temporarily unavailable"),
        ConnectionResetError(),
    ],
)
def test_broker_errors_are_transient(exc: Exception) -> None:
    assert is_transient(exc)


@pytest.mark.parametrize(
    "exc",
    [
        InvalidTransition("no such step"),
        ValueError("bad event"),
        KeyError("x"),
        nats.js.errors.APIError(code=400, err_code=10071, description="wrong last sequence"),
    ],
)
def test_content_errors_are_not(exc: Exception) -> None:
    assert not is_transient(exc)


async def test_a_transient_error_is_retried_until_the_broker_answers() -> None:
    calls = 0

    async def flaky() -> str:
        nonlocal calls
        calls += 1
        if calls < 3:
            raise nats.js.errors.NoStreamResponseError()
        return "done"

    assert await retry_transient(flaky, what="test") == "done" and calls == 3


async def test_a_content_error_propagates_at_once() -> None:
    calls = 0

    async def broken() -> None:
        nonlocal calls
        calls += 1
        raise ValueError("bad event")

    with pytest.raises(ValueError):
        await retry_transient(broken, what="test")
    assert calls == 1


async def test_a_broker_down_for_the_whole_window_is_reported_as_such() -> None:
    async def down() -> None:
        raise nats.errors.NoRespondersError()

    with pytest.raises(BrokerUnavailable, match="broker unavailable"):
        await retry_transient(down, what="test", within_s=0.3)
