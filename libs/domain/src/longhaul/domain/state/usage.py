"""What a trace used, a fold of its own: the totals over its whole life (``GET`` and the index
show them) and the current run's usage, which the budgets count (``longhaul.domain.budget``)
and only a new run resets (a wait, a crash or a takeover never hands out a fresh budget)."""

from __future__ import annotations

import msgspec
from longhaul.domain import events as ev
from longhaul.domain.messages import add_counts


class Allowance(msgspec.Struct, kw_only=True, frozen=True):
    """Tokens and dollars a run may spend past the limits it counts."""

    tokens: int = 0
    cost: float = 0.0


class Spending(msgspec.Struct, kw_only=True):
    totals: ev.Totals = msgspec.field(default_factory=ev.Totals)
    run: ev.RunUsage = msgspec.field(default_factory=ev.RunUsage)
    """What the current run used: the budgets count this (reset only by a new run)."""
    raised: Allowance = msgspec.field(default_factory=lambda: Allowance())
    """What answers to ``budget`` waits let this run spend past its limits (reset by a new
    run)."""

    def raise_by(self, tokens: int, cost: float) -> None:
        self.raised = Allowance(tokens=self.raised.tokens + tokens, cost=self.raised.cost + cost)

    def charge(self, event: ev.MessageAppended) -> None:
        """A message's usage and cost; an assistant step of the main loop is one iteration
        (a synthetic message, a reflection or a side branch is not)."""
        totals, run, usage = self.totals, self.run, event.usage
        if usage is not None:
            totals.prompt_tokens += usage.prompt_tokens
            totals.completion_tokens += usage.completion_tokens
            totals.cache_read_tokens += usage.cache_read_tokens
            totals.cache_write_tokens += usage.cache_write_tokens
            if usage.saved_tokens:
                totals.saved_tokens = add_counts(totals.saved_tokens, usage.saved_tokens)
            run.tokens += usage.prompt_tokens + usage.completion_tokens
        totals.cost += event.cost
        totals.duration_ms += event.duration_ms
        run.cost += event.cost
        if event.role == "assistant" and event.branch_type == "main" and not event.synthetic:
            run.iterations += 1

    def charge_child(self, event: ev.SubtraceFinished) -> None:
        """A sub-trace's run counts against this run's budget once it reports its end."""
        self.run.tokens += event.tokens
        self.run.cost += event.cost

    def new_run(self) -> None:
        self.run = ev.RunUsage()
        self.raised = Allowance()

    def copy(self) -> Spending:
        """A copy a reader may hold while the fold goes on (both parts change in place)."""
        return Spending(
            totals=msgspec.structs.replace(self.totals),
            run=msgspec.structs.replace(self.run),
            raised=self.raised,
        )
