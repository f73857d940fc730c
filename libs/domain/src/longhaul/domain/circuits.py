"""The circuit breaker per model provider, as pure transitions over one KV value.

``failures`` outages of a provider within ``window_s`` open its circuit: every executor then
skips the provider (moving traces to their fallback models) for ``open_s``. After that the
circuit is half-open: the first caller claims the probe (``probing_until``) and calls; its
success closes the circuit, its failure opens it again. The executor keeps the value in the
``lh_circuits`` bucket and writes it by compare-and-set; the gateway reads it for ``/readyz``
and ``/metrics``.
"""

from __future__ import annotations

import msgspec
from longhaul.domain.config import CircuitConfig


class Circuit(msgspec.Struct, kw_only=True, omit_defaults=True):
    failures: list[float] = msgspec.field(default_factory=list)
    """Wall-clock times of the outages counted in the current window."""
    opened_at: float | None = None
    probing_until: float | None = None
    """A half-open probe is under way (another caller waits) until then."""

    @property
    def clean(self) -> bool:
        return not self.failures and self.opened_at is None

    def is_open(self, now: float, config: CircuitConfig) -> bool:
        """Skipped now: open and not yet half-open (or half-open with a probe under way)."""
        if self.opened_at is None:
            return False
        if now < self.opened_at + config.open_s:
            return True
        return self.probing_until is not None and now < self.probing_until

    def probe(self, now: float, config: CircuitConfig) -> Circuit:
        """Half-open: this caller probes; others skip until the probe ends (or times out)."""
        return Circuit(
            failures=self.failures, opened_at=self.opened_at, probing_until=now + config.open_s
        )

    def failed(self, now: float, config: CircuitConfig) -> Circuit:
        """One more outage: a half-open circuit opens again, a closed one opens at the limit."""
        if self.opened_at is not None:
            return Circuit(opened_at=now)
        recent = [t for t in self.failures if now - t < config.window_s] + [now]
        if len(recent) >= config.failures:
            return Circuit(opened_at=now)
        return Circuit(failures=recent)


def encode(circuit: Circuit) -> bytes:
    return msgspec.json.encode(circuit)


def decode(value: bytes | None) -> Circuit:
    """An unreadable or empty value is a closed circuit (the breaker only saves calls)."""
    if not value:
        return Circuit()
    try:
        return msgspec.json.decode(value, type=Circuit)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return Circuit()
