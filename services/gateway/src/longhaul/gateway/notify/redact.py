"""Webhook URLs are credentials — a Slack incoming webhook's path is its secret — so none
appears in a log line (httpx logs every request's URL at INFO) or in a delivery's recorded
error, which the run's key reads: each is replaced by ``[webhook <name>]``."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager

from longhaul.domain.notify import WebhookConfig

LOGGERS = ("httpx",)
"""A logger's filters see only its own records: the notifier logs errors already scrubbed."""


class UrlRedactor(logging.Filter):
    def __init__(self, hooks: list[WebhookConfig]) -> None:
        super().__init__()
        pairs = [(str(hook.url), f"[webhook {hook.name}]") for hook in hooks]
        self.pairs = sorted(pairs, key=lambda pair: -len(pair[0]))  # longest first

    def scrub(self, text: str) -> str:
        for url, name in self.pairs:
            text = text.replace(url, name)
        return text

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        scrubbed = self.scrub(message)
        if scrubbed != message:
            record.msg, record.args = scrubbed, None
        return True

    @contextmanager
    def installed(self) -> Iterator[None]:
        """On the loggers that could name a webhook, for as long as the notifier runs."""
        loggers = [logging.getLogger(name) for name in LOGGERS]
        for logger in loggers:
            logger.addFilter(self)
        try:
            yield
        finally:
            for logger in loggers:
                logger.removeFilter(self)
