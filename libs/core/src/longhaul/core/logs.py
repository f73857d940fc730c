"""Structured JSON logs, one object per line, with the trace/task id of the current work."""

from __future__ import annotations

import contextvars
import json
import logging
import os
import sys
import time
from typing import Any

current_trace_id: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "current_trace_id", default=None
)
current_task_id: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "current_task_id", default=None
)


class JsonFormatter(logging.Formatter):
    def __init__(self, service: str) -> None:
        super().__init__()
        self.service = service

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "ts": round(record.created, 3),
            "level": record.levelname.lower(),
            "service": self.service,
            "logger": record.name,
            "msg": record.getMessage(),
        }
        trace_id = getattr(record, "trace_id", None) or current_trace_id.get()
        task_id = getattr(record, "task_id", None) or current_task_id.get()
        if trace_id:
            entry["trace_id"] = trace_id
        if task_id:
            entry["task_id"] = task_id
        if record.exc_info:
            entry["exc"] = self.formatException(record.exc_info)
        return json.dumps(entry, default=str)


def configure_logging(service: str, level: str | None = None) -> None:
    """JSON lines on stderr; ``LONGHAUL_LOG_LEVEL`` sets the level (default INFO)."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter(service))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel((level or os.environ.get("LONGHAUL_LOG_LEVEL", "INFO")).upper())
    logging.getLogger("nats").setLevel(logging.WARNING)
    logging.Formatter.converter = time.gmtime
