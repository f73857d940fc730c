"""Errors as exceptions: every refusal of the gateway carries its HTTP status and the stable
``code`` of its JSON error body, so a script branches on ``except NotFound`` or on
``exc.code`` rather than on message text."""

from __future__ import annotations

from typing import Any

import httpx


class LonghaulError(Exception):
    """Base of everything the client raises."""


class Unreachable(LonghaulError):
    """No connection to the gateway (refused, timed out, name unknown)."""

    def __init__(self, url: str, cause: Exception) -> None:
        super().__init__(f"cannot reach the gateway at {url} ({type(cause).__name__})")
        self.url = url


class StreamLost(LonghaulError):
    """An event stream kept failing after its reconnection attempts."""


class ApiError(LonghaulError):
    """The gateway refused the request: ``status`` and ``code`` from its error body
    (``{"error": {"code", "message", "details"}}``)."""

    def __init__(
        self,
        status: int,
        code: str,
        message: str,
        details: Any = None,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(f"{status} {code}: {message}")
        self.status = status
        self.code = code
        self.message = message
        self.details = details
        self.retry_after = retry_after


class BadRequest(ApiError):
    """400"""


class Unauthorized(ApiError):
    """401: no API key, or one the gateway does not know."""


class Forbidden(ApiError):
    """403"""


class NotFound(ApiError):
    """404: unknown, or another key's (the gateway never says which)."""


class Conflict(ApiError):
    """409: the request does not fit the trace's current status."""


class PayloadTooLarge(ApiError):
    """413"""


class InvalidRequest(ApiError):
    """422: the body or a parameter was refused; ``details`` says where."""


class RateLimited(ApiError):
    """429: too many requests or active traces; ``retry_after`` in seconds when given."""


class ServiceUnavailable(ApiError):
    """503: the gateway is up but not ready (NATS down, draining)."""


BY_STATUS: dict[int, type[ApiError]] = {
    400: BadRequest,
    401: Unauthorized,
    403: Forbidden,
    404: NotFound,
    409: Conflict,
    413: PayloadTooLarge,
    422: InvalidRequest,
    429: RateLimited,
    503: ServiceUnavailable,
}


def error_from(response: httpx.Response) -> ApiError:
    """The exception for a refused ``response`` (its body already read)."""
    try:
        error = response.json()["error"]
        code, message, details = str(error["code"]), str(error["message"]), error.get("details")
    except (ValueError, KeyError, TypeError):
        code, message, details = "error", response.text[:200] or response.reason_phrase, None
    retry_after: float | None = None
    try:
        retry_after = float(response.headers["Retry-After"])
    except (KeyError, ValueError):
        pass
    kind = BY_STATUS.get(response.status_code, ApiError)
    return kind(response.status_code, code, message, details, retry_after)
