"""What every remote sub-agent protocol reports (``remote_agents``, longhaul or A2A): its
errors, a child's status, and the ``agent://host:port/<id>`` id the parent knows it by."""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlsplit

from longhaul.domain.config import RemoteAgentConfig

SUMMARY_LIMIT = 4000


def clip(text: str) -> str:
    """At most ``SUMMARY_LIMIT`` characters, saying so when the answer was longer."""
    if len(text) <= SUMMARY_LIMIT:
        return text
    marker = f"\n[cut: the answer has {len(text)} characters; the first ones are shown]"
    return text[: SUMMARY_LIMIT - len(marker)] + marker


class RemoteError(Exception):
    """A remote call that cannot succeed as is; ``transient``: worth asking again later."""

    def __init__(self, message: str, *, transient: bool = False) -> None:
        super().__init__(message)
        self.transient = transient


@dataclass(frozen=True)
class RemoteStatus:
    status: str
    summary: str
    tokens: int
    cost: float


def remote_id(config: RemoteAgentConfig, trace_id: str) -> str:
    return f"agent://{urlsplit(config.url).netloc}/{trace_id}"


def remote_trace_id(linked: str) -> str:
    return linked.rsplit("/", 1)[-1]
