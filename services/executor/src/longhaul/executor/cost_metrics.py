"""What model calls cost, as Prometheus counters by model and preset: ``longhaul_model_cost_usd``
and ``longhaul_model_tokens{kind}``, in the executor's registry.

A call is counted when this executor's write adds it to ``lh_spend`` (``SpendLedger``'s
``on_counted``), so once across executors. The label sets are bounded: each label value is a
series kept for ever, so a model the config does not name and a preset it does not define
are counted as ``other``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from longhaul.core.config import LonghaulConfig
from longhaul.domain.state import Message
from prometheus_client import CollectorRegistry, Counter

OTHER = "other"


def known_models(config: LonghaulConfig) -> set[str]:
    """The model strings the config names, with the bare model name a provider answers with
    (``gpt-4o`` for ``openai:gpt-4o``)."""
    named = config.models.operator_strings() | set(config.models.prices)
    for preset in config.presets.values():
        named.update(preset.get("model_fallback") or [])
    return named | {name.split(":", 1)[1] for name in named if ":" in name}


class CostCounters:
    def __init__(
        self, registry: CollectorRegistry, models: Iterable[str], presets: Iterable[str]
    ) -> None:
        self.models = frozenset(models)
        self.presets = frozenset(presets)
        self.cost = Counter(
            "longhaul_model_cost_usd",
            "dollars model calls cost, by model and preset (counted once across executors; "
            "a model or preset the config does not name is other)",
            ["model", "preset"],
            registry=registry,
        )
        self.tokens = Counter(
            "longhaul_model_tokens",
            "prompt and completion tokens of model calls, by model and preset (as the cost)",
            ["model", "preset", "kind"],
            registry=registry,
        )

    def charge(self, messages: Sequence[Message], preset: str) -> None:
        """Count what the spend ledger just counted: summed by model first, since a count can
        hold a whole turn's calls and each ``labels`` lookup costs more than the sum."""
        preset_label = preset if preset in self.presets else OTHER
        sums: dict[str, list[float]] = {}
        tokens: dict[str, list[int]] = {}
        for message in messages:
            model = message.model if message.model in self.models else OTHER
            sums.setdefault(model, [0.0])[0] += message.cost
            if message.usage is not None:
                counted = tokens.setdefault(model, [0, 0])
                counted[0] += message.usage.prompt_tokens
                counted[1] += message.usage.completion_tokens
        for model, (cost,) in sums.items():
            self.cost.labels(model, preset_label).inc(cost)
        for model, (prompt, completion) in tokens.items():
            self.tokens.labels(model, preset_label, "prompt").inc(prompt)
            self.tokens.labels(model, preset_label, "completion").inc(completion)
