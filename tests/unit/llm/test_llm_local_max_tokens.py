"""``models.local.max_tokens`` on the wire: every ``local:`` request that sets no bound gets
the operator's (a small model unbounded rambles for many minutes); a trace's own wins."""

from __future__ import annotations

from typing import Any

from longhaul.domain.config import LocalModelConfig
from longhaul.llm.providers.openai import OpenAICodec
from longhaul.llm.types import ModelRequest

HI = [{"role": "user", "content": "hi"}]


def sent(codec: OpenAICodec, max_tokens: int | None = None) -> dict[str, Any]:
    return codec.build(
        "smollm2", ModelRequest(model="local:smollm2", messages=HI, max_tokens=max_tokens)
    ).body


def test_a_request_without_a_bound_gets_the_operators_and_its_own_wins() -> None:
    default = LocalModelConfig().max_tokens
    assert default == 1024
    codec = OpenAICodec(named_tool_choice=False, max_tokens=default)
    assert sent(codec)["max_tokens"] == 1024
    assert sent(codec, max_tokens=50)["max_tokens"] == 50  # model_params.max_tokens
    assert "max_tokens" not in sent(OpenAICodec(max_tokens=None))  # null: no bound
    assert "max_tokens" not in sent(OpenAICodec())  # other providers: unchanged
