"""Keep API keys out of the gateway's logs.

Browsers cannot set headers on a WebSocket, so the viewer sends its key as ``?api_key=``;
uvicorn logs every WebSocket handshake with its query string. This filter rewrites those
records before any handler sees them.
"""

from __future__ import annotations

import logging
import re

KEY_IN_QUERY = re.compile(r"((?:^|[?&])api_key=)[^&\s\"']*", re.IGNORECASE)


class QueryKeyRedactor(logging.Filter):
    """Replaces the value of every ``api_key=`` query parameter in a record's message."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        redacted = KEY_IN_QUERY.sub(r"\1[redacted]", message)
        if redacted != message:
            record.msg, record.args = redacted, None
        return True


def redact_uvicorn_logs() -> None:
    """Install the redactor on uvicorn's loggers (idempotent)."""
    for name in ("uvicorn.error", "uvicorn.access"):
        logger = logging.getLogger(name)
        if not any(isinstance(f, QueryKeyRedactor) for f in logger.filters):
            logger.addFilter(QueryKeyRedactor())
