"""The real_model tier: one llama.cpp server (packaged SmolLM2-135M) per session, a steering
proxy in front of it, and a gateway + executor stack whose openai: and anthropic: providers
point at that proxy. Missing wheels fail the fixture with the reason: never a silent skip."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from longhaul.core.config import LonghaulConfig, NatsConfig
from longhaul.domain.config import ModelsConfig, ProviderConfig
from pydantic import SecretStr

from tests.integration.gateway.harness import RunningGateway, gateway_config, serve_gateway
from tests.support.llama import LlamaProcess, SteeringProxy
from tests.support.stack import InProcessExecutor, test_config


@pytest.fixture(scope="session")
async def llama() -> AsyncIterator[LlamaProcess]:
    async with LlamaProcess() as server:
        yield server


@pytest.fixture(scope="session")
async def proxy(llama: LlamaProcess) -> AsyncIterator[SteeringProxy]:
    async with SteeringProxy(llama.url).serve() as steering:
        yield steering


def real_models(proxy: SteeringProxy, steer_rounds: int) -> ModelsConfig:
    """openai: and anthropic: both served by the real server through the proxy."""
    return ModelsConfig(
        default="openai:smollm2",
        providers={
            "openai": ProviderConfig(
                base_url=proxy.base_url(steer_rounds, openai=True), max_retries=0, read_timeout_s=60
            ),
            "anthropic": ProviderConfig(
                base_url=proxy.base_url(steer_rounds, openai=False),
                api_key=SecretStr("local"),
                max_retries=0,
                read_timeout_s=60,
            ),
        },
    )


@contextlib.asynccontextmanager
async def real_stack(
    nats_config: NatsConfig,
    namespace: str,
    work: Path,
    proxy: SteeringProxy,
    steer_rounds: int,
) -> AsyncIterator[RunningGateway]:
    models = real_models(proxy, steer_rounds)
    config: LonghaulConfig = gateway_config(nats_config)
    async with serve_gateway(config, heartbeat_s=1.0) as gateway:
        executor_config = test_config(nats_config.url, namespace, models=models)
        async with InProcessExecutor(
            nats_config.url,
            namespace,
            "exec-real",
            config=executor_config,
            settings={"working_root": work},
        ):
            yield gateway
