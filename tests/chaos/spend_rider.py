"""Issue 45's other half of ``provider-down``: a key at its daily token limit, in the same
``longhaul up`` and through the same outage. Its traces run on the fallback provider until the
key's day is spent; then each asks (a ``budget`` wait in the inbox) instead of failing, and the
key spends past its limit by at most one model call per running trace — the bound
``docs`` state, since every check comes before a model call. Measured: what the key spent, the
limit, and the largest single call."""

from __future__ import annotations

import asyncio
import hashlib
import json
import time
from dataclasses import dataclass, field
from pathlib import Path

from longhaul.client import AsyncClient
from longhaul.core.store import EventStore
from longhaul.domain.spend import tokens_of
from longhaul.gateway.auth import owner_id

from tests.support.folds import trace_state
from tests.support.llm_fakes import steps_prompt

MAIN_KEY = "chaos-main-key-4b1f2c9e8d7a6b5c"
"""The key the outage's own traces run under (no limit)."""
SPEND_KEY = "chaos-spend-key-9e8d7a6b5c4b1f2c"


def owner_of(key: str) -> str:
    return owner_id(hashlib.sha256(key.encode()).digest())


@dataclass
class SpendRider:
    root: Path
    model: str
    traces: int = 3
    steps: int = 40
    day_tokens: int = 4000
    ids: list[str] = field(default_factory=list)
    spent: int = 0
    """Tokens the key's traces used, from their logs."""
    largest_call: int = 0
    asking: int = 0
    """Traces waiting with reason ``budget`` at the end."""

    @property
    def bound(self) -> int:
        """The limit plus one model call per running trace."""
        return self.day_tokens + self.largest_call * self.traces

    def env(self) -> dict[str, str]:
        limits = {"keys": {owner_of(SPEND_KEY): {"day": {"tokens": self.day_tokens}}}}
        return {
            "LONGHAUL_API_KEYS": f"{MAIN_KEY},{SPEND_KEY}",
            "LONGHAUL_SPEND_LIMITS": json.dumps(limits),
        }

    async def start(self, gateway: str, store: EventStore) -> None:
        log = self.root / "spend-steps.jsonl"
        log.touch()
        async with AsyncClient(gateway, api_key=SPEND_KEY, timeout=30) as client:
            for n in range(self.traces):
                prompt = steps_prompt(f"spend trace {n}", steps=self.steps, log=str(log))
                created = await client.create_trace(prompt, name=f"spend {n}", model=self.model)
                self.ids.append(created.trace_id)

    async def check(self, store: EventStore, timeout_s: float = 120.0) -> list[str]:
        """Every trace of the key asks (none failed, none finished past the limit), and the
        key spent at most :attr:`bound`."""
        deadline = time.monotonic() + timeout_s
        while True:
            states = [await trace_state(store, trace_id) for trace_id in self.ids]
            asking = [s for s in states if s.status == "waiting" and s.wait_reason == "budget"]
            if len(asking) == len(states) or time.monotonic() > deadline:
                break
            await asyncio.sleep(0.2)
        calls = [tokens_of(m) for s in states for m in s.main_path() if m.usage is not None]
        self.spent, self.largest_call = sum(calls), max(calls, default=0)
        self.asking = len(asking)
        problems = [
            f"spend trace {s.trace_id} is {s.status} ({s.wait_reason or s.error}), not asking"
            for s in states
            if s not in asking
        ]
        if self.spent > self.bound:
            problems.append(
                f"the key spent {self.spent} tokens of its {self.day_tokens}: past the bound "
                f"{self.bound} (one call of at most {self.largest_call} per trace)"
            )
        return problems

    def summary(self) -> str:
        return (
            f"key at its day limit: {self.asking}/{self.traces} traces asking, "
            f"{self.spent} tokens spent of {self.day_tokens} (bound {self.bound}: one call of "
            f"at most {self.largest_call} per running trace)"
        )
