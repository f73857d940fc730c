"""Model strings to models; endpoints, keys and clients."""

from __future__ import annotations

from pathlib import Path

import pytest
from longhaul.domain.config import LocalModelConfig, ModelsConfig, ProviderConfig
from longhaul.llm import (
    MissingApiKeyError,
    ModelRegistry,
    ModelRequest,
    ScriptedModel,
    UnknownProviderError,
    close,
    resolve_model,
)
from longhaul.llm.http_model import HttpModel
from longhaul.llm.local import LocalModelError, model_path
from longhaul.llm.registry import check_model_string
from pydantic import SecretStr

from tests.support.llm_fakes import FakeAnthropic, FakeOpenAI, Reply

HELLO = ModelRequest(model="", messages=[{"role": "user", "content": "hello"}])


def test_unknown_provider_is_a_value_error_naming_the_known_ones(registry: ModelRegistry) -> None:
    with pytest.raises(UnknownProviderError, match="unknown provider 'mistral'") as caught:
        registry.resolve("mistral:large")
    assert isinstance(caught.value, ValueError)
    assert "openai" in str(caught.value) and "scripted" in str(caught.value)


@pytest.mark.parametrize("bad", ["gpt-4o", ":gpt-4o", "openai:"])
def test_malformed_model_strings(registry: ModelRegistry, bad: str) -> None:
    with pytest.raises(ValueError, match="provider:model"):
        registry.resolve(bad)


def test_providers_that_need_a_key_fail_fast_without_one(registry: ModelRegistry) -> None:
    with pytest.raises(MissingApiKeyError, match="ANTHROPIC_API_KEY"):
        registry.resolve("anthropic:claude-sonnet-4-5")
    assert isinstance(registry.resolve("openai:llama3"), HttpModel)


async def test_endpoint_from_environment_variables() -> None:
    async with FakeAnthropic([Reply(text="from env")]) as server:
        env = {"ANTHROPIC_BASE_URL": server.base_url, "ANTHROPIC_API_KEY": server.api_key}
        async with ModelRegistry(env=env) as registry:
            response = await registry.resolve("anthropic:claude-3-5-haiku").complete(HELLO)
    assert response.content == "from env"


async def test_custom_provider_name_with_kind(registry: ModelRegistry) -> None:
    async with FakeOpenAI([Reply(text="local")]) as server:
        config = server.models_config("vllm")
        model = registry.resolve("vllm:meta-llama/Llama-3.1-8B", config)
        response = await model.complete(HELLO)
    assert model.name == "vllm:meta-llama/Llama-3.1-8B" and response.content == "local"
    assert server.requests[0].json["model"] == "meta-llama/Llama-3.1-8B"


async def test_per_role_models_and_close_releases_clients() -> None:
    config = ModelsConfig(
        default="scripted:auto",
        roles={"planner": "openai:gpt-4.1"},
        providers={"openai": ProviderConfig(api_key=SecretStr("k"), base_url="http://127.0.0.1:9")},
    )
    registry = ModelRegistry(config, env={})
    planner = registry.for_role("planner")
    assert isinstance(planner, HttpModel) and planner.name == "openai:gpt-4.1"
    assert isinstance(registry.for_role("verifier"), ScriptedModel)
    await registry.aclose()
    assert planner.endpoint.client.is_closed


async def test_module_level_resolve_shares_clients_until_close() -> None:
    config = ModelsConfig(providers={"openai": ProviderConfig(base_url="http://127.0.0.1:9")})
    first = resolve_model("openai:a", config)
    second = resolve_model("openai:b", config)
    assert isinstance(first, HttpModel) and isinstance(second, HttpModel)
    assert first.endpoint is second.endpoint
    await close()
    assert first.endpoint.client.is_closed


def test_scripted_strings(registry: ModelRegistry, tmp_path: Path) -> None:
    script = tmp_path / "turns.yaml"
    script.write_text("- content: hi\n")
    auto = registry.resolve("scripted:auto?latency_ms=25&chunk=3")
    assert isinstance(auto, ScriptedModel)
    assert (auto.latency_s, auto.chunk_chars) == (0.025, 3)
    assert isinstance(registry.resolve(f"scripted:{script}"), ScriptedModel)
    with pytest.raises(ValueError, match="no such script"):
        registry.resolve("scripted:missing.yaml")
    with pytest.raises(ValueError, match="bad option"):
        registry.resolve("scripted:auto?latency_ms=soon")


def test_script_files_are_read_only_from_the_operators_directory(tmp_path: Path) -> None:
    allowed = tmp_path / "scripts"
    allowed.mkdir()
    (allowed / "ok.yaml").write_text("- content: hi\n")
    secret = tmp_path / "secret.yaml"
    secret.write_text("- content: the launch code is 0000\n")
    (allowed / "link.yaml").symlink_to(secret)
    inside = ModelRegistry(ModelsConfig(scripted_dir=allowed))
    assert isinstance(inside.resolve("scripted:ok.yaml"), ScriptedModel)
    assert isinstance(inside.resolve(f"scripted:{allowed / 'ok.yaml'}"), ScriptedModel)
    for outside in (str(secret), "../secret.yaml", "link.yaml", "/etc/passwd"):
        with pytest.raises(ValueError, match=r"no such script in models\.scripted_dir") as raised:
            inside.resolve(f"scripted:{outside}")
        assert "launch code" not in str(raised.value)
    with pytest.raises(ValueError, match="script files are disabled"):
        ModelRegistry(ModelsConfig(scripted_dir=None)).resolve(f"scripted:{allowed / 'ok.yaml'}")
    assert isinstance(
        ModelRegistry(ModelsConfig(scripted_dir=None)).resolve("scripted:auto"), ScriptedModel
    )


def test_a_broken_script_is_reported_without_its_content(tmp_path: Path) -> None:
    (tmp_path / "bad.yaml").write_text("- content: fine\n- {password: hunter2\n")
    registry = ModelRegistry(ModelsConfig(scripted_dir=tmp_path))
    with pytest.raises(ValueError, match=r"not a valid YAML/JSON script at line") as raised:
        registry.resolve("scripted:bad.yaml")
    assert "hunter2" not in str(raised.value) and raised.value.__cause__ is None


def test_the_gateway_check_refuses_an_unknown_provider_and_knows_configured_names() -> None:
    config = ModelsConfig(providers={"vllm": ProviderConfig(kind="openai")})
    with pytest.raises(UnknownProviderError, match="unknown provider 'nope'"):
        check_model_string("nope:model", config)
    for fine in ("openai:gpt-4o", "anthropic:claude", "gemini:flash", "vllm:llama"):
        check_model_string(fine, config)
    check_model_string("local:smollm2", config)


def test_a_client_names_only_local_models_the_operator_chose(tmp_path: Path) -> None:
    """Whoever names a ``local:`` model loads it into the executor's process, outside any
    sandbox: a path (an upload, say) is the operator's to write, never a client's."""
    upload = tmp_path / "uploads" / "evil.gguf"
    upload.parent.mkdir()
    upload.write_bytes(b"GGUF")
    listed = tmp_path / "ours.gguf"
    listed.write_bytes(b"GGUF")
    config = ModelsConfig(default="scripted:auto", local=LocalModelConfig(models={"ours": listed}))
    for hostile in (f"local:{upload}", "local:../../uploads/evil.gguf", "local:x"):
        with pytest.raises(ValueError, match="not a local model of this deployment"):
            check_model_string(hostile, config)
        with pytest.raises(LocalModelError, match="not a local model of this deployment"):
            model_path(hostile.removeprefix("local:"), config)
    assert model_path("ours", config) == listed
    check_model_string("local:ours", config)
    operator = ModelsConfig(default=f"local:{upload}")
    assert model_path(str(upload), operator) == upload
    check_model_string(f"local:{upload}", operator)
