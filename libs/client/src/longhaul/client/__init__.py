"""Python client for the longhaul gateway.

``Client`` (blocking) and ``AsyncClient`` (asyncio) over httpx, with typed answers
(:mod:`longhaul.client.models`), refusals as exceptions carrying the HTTP status and the
error ``code`` (:mod:`longhaul.client.errors`), and event streams that resume with
``Last-Event-ID`` after a dropped connection. Base URL and API key default to
``LONGHAUL_URL`` and ``LONGHAUL_API_KEY``, as for the ``longhaul`` command.
"""

from longhaul.client._async import AsyncClient
from longhaul.client._sync import Client
from longhaul.client._transport import API_KEY_ENV, DEFAULT_URL, URL_ENV
from longhaul.client.errors import (
    ApiError,
    BadRequest,
    Conflict,
    Forbidden,
    InvalidRequest,
    LonghaulError,
    NotFound,
    PayloadTooLarge,
    RateLimited,
    ServiceUnavailable,
    StreamLost,
    Unauthorized,
    Unreachable,
)
from longhaul.client.models import (
    Accepted,
    Deleted,
    Event,
    Info,
    Message,
    MessageAccepted,
    Messages,
    Task,
    TaskAccepted,
    TaskList,
    Trace,
    TraceImported,
    TraceList,
    TraceSettings,
    TraceSummary,
)

__all__ = [
    "API_KEY_ENV",
    "DEFAULT_URL",
    "URL_ENV",
    "Accepted",
    "ApiError",
    "AsyncClient",
    "BadRequest",
    "Client",
    "Conflict",
    "Deleted",
    "Event",
    "Forbidden",
    "Info",
    "InvalidRequest",
    "LonghaulError",
    "Message",
    "MessageAccepted",
    "Messages",
    "NotFound",
    "PayloadTooLarge",
    "RateLimited",
    "ServiceUnavailable",
    "StreamLost",
    "Task",
    "TaskAccepted",
    "TaskList",
    "Trace",
    "TraceImported",
    "TraceList",
    "TraceSettings",
    "TraceSummary",
    "Unauthorized",
    "Unreachable",
]
