"""The executor's cost and token counters keep bounded label sets: a model or preset the
config does not name is counted as ``other`` (each label value is a series kept for ever)."""

from __future__ import annotations

from longhaul.core.config import LonghaulConfig
from longhaul.domain import events as ev
from longhaul.domain.config import ModelsConfig
from longhaul.executor.cost_metrics import CostCounters, known_models
from prometheus_client import CollectorRegistry


def call(model: str, tokens: int, cost: float) -> ev.MessageAppended:
    usage = ev.Usage(prompt_tokens=tokens, completion_tokens=1)
    return ev.MessageAppended(
        sequence=1, parent_sequence=None, role="assistant", usage=usage, cost=cost, model=model
    )


def test_unknown_models_and_presets_are_folded_into_other() -> None:
    config = LonghaulConfig(
        models=ModelsConfig(default="openai:gpt-4o", fallback=["anthropic:claude-sonnet-4-5"]),
        presets={"mine": {"model_fallback": ["openai:gpt-4o-mini"]}},
    )
    registry = CollectorRegistry()
    metrics = CostCounters(registry, known_models(config), {"default", "mine"})
    assert {"openai:gpt-4o", "gpt-4o", "claude-sonnet-4-5", "gpt-4o-mini"} <= metrics.models

    metrics.charge([call("gpt-4o", 10, 0.5), call("model-a-client-made-up", 5, 0.25)], "mine")
    metrics.charge([call("gpt-4o", 1, 0.125)], "preset-a-client-made-up")
    value = registry.get_sample_value
    assert value("longhaul_model_cost_usd_total", {"model": "gpt-4o", "preset": "mine"}) == 0.5
    assert value("longhaul_model_cost_usd_total", {"model": "other", "preset": "mine"}) == 0.25
    assert value("longhaul_model_cost_usd_total", {"model": "gpt-4o", "preset": "other"}) == 0.125
    tokens = {"model": "gpt-4o", "preset": "mine", "kind": "prompt"}
    assert value("longhaul_model_tokens_total", tokens) == 10
    labels = {s.labels.get("model") for m in registry.collect() for s in m.samples}
    assert "model-a-client-made-up" not in labels


def test_a_count_of_many_calls_adds_each_models_sums_once() -> None:
    """A turn's end counts all its calls at once: the counters gain their sums, and a model
    whose calls reported no usage gets no token series."""
    registry = CollectorRegistry()
    metrics = CostCounters(registry, {"gpt-4o", "o3"}, {"default"})
    no_usage = ev.MessageAppended(
        sequence=9, parent_sequence=None, role="assistant", cost=0.5, model="o3"
    )
    metrics.charge([call("gpt-4o", n, 0.25) for n in range(1, 101)] + [no_usage], "default")
    value = registry.get_sample_value
    mine = {"model": "gpt-4o", "preset": "default"}
    assert value("longhaul_model_cost_usd_total", mine) == 25.0
    assert value("longhaul_model_tokens_total", {**mine, "kind": "prompt"}) == 5050
    assert value("longhaul_model_tokens_total", {**mine, "kind": "completion"}) == 100
    assert value("longhaul_model_cost_usd_total", {"model": "o3", "preset": "default"}) == 0.5
    o3_prompt = {"model": "o3", "preset": "default", "kind": "prompt"}
    assert value("longhaul_model_tokens_total", o3_prompt) is None
