"""One attempt at one delivery over httpx, and when to try again.

Every attempt carries the delivery's stable id (``X-Longhaul-Delivery-Id``: a receiver that
saw it already answers 2xx and does nothing), the kind, and a fresh timestamp signed with the
body when the webhook has a ``secret`` (``longhaul.domain.signature``). 2xx is delivered;
a timeout, a connection error, 408, 425, 429 and 5xx are tried again after an exponential
backoff with jitter (a ``Retry-After`` in seconds is honoured up to ``retry_max_s``); any
other answer (3xx: redirects are not followed; 4xx: the receiver refuses it) fails the
delivery at once, as trying again would get the same answer.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Callable
from dataclasses import dataclass

import httpx
from longhaul.domain.notify import WebhookConfig
from longhaul.domain.signature import SIGNATURE_HEADER, TIMESTAMP_HEADER, sign

DELIVERY_HEADER = "X-Longhaul-Delivery-Id"
KIND_HEADER = "X-Longhaul-Event"
RETRIED_STATUSES = frozenset({408, 425, 429})
ERROR_LIMIT = 300


@dataclass(frozen=True)
class Attempt:
    delivered: bool
    retry: bool
    """A failure another attempt may cure."""
    status_code: int | None = None
    error: str | None = None
    retry_after_s: float | None = None


def headers(
    hook: WebhookConfig, delivery_id: str, kind: str, body: bytes, now: float
) -> dict[str, str]:
    timestamp = str(int(now))
    sent = {
        "Content-Type": "application/json",
        "User-Agent": "longhaul-notify",
        DELIVERY_HEADER: delivery_id,
        KIND_HEADER: kind,
        TIMESTAMP_HEADER: timestamp,
    }
    if hook.secret is not None:
        sent[SIGNATURE_HEADER] = sign(hook.secret.get_secret_value(), timestamp, body)
    return sent


def _retry_after(response: httpx.Response) -> float | None:
    value = response.headers.get("Retry-After", "")
    return float(value) if value.isdigit() else None


async def attempt(
    client: httpx.AsyncClient,
    hook: WebhookConfig,
    delivery_id: str,
    kind: str,
    body: bytes,
    *,
    clock: Callable[[], float] = time.time,
) -> Attempt:
    """POST ``body`` once, all of it (connect to the last byte read) within the webhook's
    ``timeout_s``; of the answer's body only the start is read, for the record's error."""
    sent = headers(hook, delivery_id, kind, body, clock())
    try:
        async with (
            asyncio.timeout(hook.timeout_s),
            client.stream(
                "POST", str(hook.url), content=body, headers=sent, timeout=hook.timeout_s
            ) as response,
        ):
            code = response.status_code
            text = "" if 200 <= code < 300 else await _start_of(response)
    except (TimeoutError, httpx.TimeoutException):
        return Attempt(delivered=False, retry=True, error=f"no answer within {hook.timeout_s:g}s")
    except httpx.HTTPError as exc:
        error = f"{type(exc).__name__}: {exc}"[:ERROR_LIMIT]
        return Attempt(delivered=False, retry=True, error=error)
    if 200 <= code < 300:
        return Attempt(delivered=True, retry=False, status_code=code)
    retry = code >= 500 or code in RETRIED_STATUSES
    return Attempt(
        delivered=False,
        retry=retry,
        status_code=code,
        error=f"HTTP {code}: {text}".rstrip(": "),
        retry_after_s=_retry_after(response),
    )


async def _start_of(response: httpx.Response) -> str:
    """The first ``ERROR_LIMIT`` bytes of the answer (a receiver's error page may be big)."""
    start = b""
    async for chunk in response.aiter_bytes():
        start += chunk
        if len(start) >= ERROR_LIMIT:
            break
    return start[:ERROR_LIMIT].decode("utf-8", errors="replace")


def backoff_s(
    hook: WebhookConfig,
    attempts: int,
    retry_after_s: float | None = None,
    rand: Callable[[], float] = random.random,
) -> float:
    """The wait before attempt ``attempts + 1``: ``retry_base_s · 2^(attempts-1)``, capped at
    ``retry_max_s``, times a jitter in [0.5, 1) so that receivers coming back from an outage
    are not hit by every delivery at once; at least the receiver's ``Retry-After``."""
    ceiling = min(hook.retry_max_s, hook.retry_base_s * 2 ** max(0, attempts - 1))
    wait = ceiling * (0.5 + rand() / 2)
    if retry_after_s is not None:
        wait = max(wait, min(retry_after_s, hook.retry_max_s))
    return wait
