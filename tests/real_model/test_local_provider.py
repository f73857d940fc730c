"""``local:`` models: llama.cpp's server started lazily inside this process."""

from __future__ import annotations

from pathlib import Path

import pytest
from longhaul.domain.config import LocalModelConfig, ModelsConfig
from longhaul.llm.local import LocalModel, LocalModelError
from longhaul.llm.registry import ModelRegistry
from longhaul.llm.types import ModelRequest, TextDelta, ToolSpec

from tests.support.llama import TEMPLATE, wheels_or_fail

pytestmark = pytest.mark.real_model


def test_unknown_names_and_missing_files_are_refused_with_the_choices(tmp_path: Path) -> None:
    registry = ModelRegistry(ModelsConfig(default="scripted:auto"), env={})
    for spec in ("local:nope", f"local:{tmp_path / 'missing.gguf'}", f"local:{tmp_path}"):
        with pytest.raises(LocalModelError, match=r"not a local model of this deployment"):
            registry.resolve(spec)
        # written by the operator, a path is taken, and must be a .gguf file
        operator = ModelRegistry(ModelsConfig(default=spec), env={})
        if spec != "local:nope":
            with pytest.raises(LocalModelError, match=r"no \.gguf file there"):
                operator.resolve(spec)


async def test_local_smollm2_starts_once_and_streams_a_named_tool_call() -> None:
    wheels_or_fail()
    config = ModelsConfig(
        local=LocalModelConfig(threads=2, n_ctx=2048, parallel=1, chat_template=str(TEMPLATE))
    )
    async with ModelRegistry(config, env={}) as registry:
        model = registry.resolve("local:smollm2")
        again = registry.resolve("local:smollm2")
        assert isinstance(model, LocalModel) and isinstance(again, LocalModel)
        text = [
            event
            async for event in model.stream(
                ModelRequest(
                    model=model.name,
                    messages=[{"role": "user", "content": "Say hi."}],
                    max_tokens=8,
                    temperature=0,
                )
            )
            if isinstance(event, TextDelta)
        ]
        assert "".join(delta.text for delta in text).strip()
        # the same process-wide server, not a second one
        assert await again._model() is not None
        from longhaul.llm.local import _servers

        assert len(_servers) == 1
        # llama.cpp ignores tool_choice objects: {name} is sent as required + that tool only,
        # and with a prefill the server's grammar makes the model call exactly that tool
        response = await model.complete(
            ModelRequest(
                model=model.name,
                tools=[
                    ToolSpec(name="read"),
                    ToolSpec(
                        name="write",
                        parameters={
                            "type": "object",
                            "properties": {"path": {"type": "string"}},
                            "required": ["path"],
                        },
                    ),
                ],
                messages=[
                    {"role": "user", "content": "Write notes.txt."},
                    {"role": "assistant", "content": "<tool_call>\n"},
                ],
                tool_choice={"name": "write"},
                max_tokens=40,
                temperature=0,
            )
        )
        assert [call.name for call in response.tool_calls][:1] == ["write"]
        assert {call.name for call in response.tool_calls} == {"write"}
