"""NATS connection options against real servers: mutual TLS with a throwaway CA (trustme),
and token auth. A wrong CA, a missing client certificate or a wrong token is a clear error
naming the setting to fix, not a hang."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import trustme
from longhaul.core.config import NatsConfig
from longhaul.core.connection import NatsConnectError, connect
from longhaul.core.nats_server import NatsServer, ServerTls
from longhaul.core.provision import ProvisionSettings
from pydantic import SecretStr

from tests.support.nats import unique_namespace


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("pki")
    ca, other_ca = trustme.CA(), trustme.CA()
    server = ca.issue_cert("127.0.0.1", "localhost")
    client = ca.issue_cert("longhaul-executor")
    files = {
        "ca": root / "ca.pem",
        "other_ca": root / "other-ca.pem",
        "server_cert": root / "server.pem",
        "server_key": root / "server.key",
        "client_cert": root / "client.pem",
        "client_key": root / "client.key",
    }
    ca.cert_pem.write_to_path(str(files["ca"]))
    other_ca.cert_pem.write_to_path(str(files["other_ca"]))
    server.cert_chain_pems[0].write_to_path(str(files["server_cert"]))
    server.private_key_pem.write_to_path(str(files["server_key"]))
    client.cert_chain_pems[0].write_to_path(str(files["client_cert"]))
    client.private_key_pem.write_to_path(str(files["client_key"]))
    return files


@pytest.fixture(scope="module")
def tls_url(pki: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    tls = ServerTls(pki["server_cert"], pki["server_key"], ca=pki["ca"], verify=True)
    with NatsServer(tmp_path_factory.mktemp("tls-js"), port=0, tls=tls) as server:
        yield server.url


def config(url: str, **fields: object) -> NatsConfig:
    return NatsConfig(url=url, namespace=unique_namespace(), connect_timeout_s=3, **fields)  # type: ignore[arg-type]


async def test_mutual_tls_connects_and_jetstream_works(tls_url: str, pki: dict[str, Path]) -> None:
    settings = config(
        tls_url, tls_ca=pki["ca"], tls_cert=pki["client_cert"], tls_key=pki["client_key"]
    )
    conn = await connect(settings, provision_settings=ProvisionSettings())
    try:
        info = await conn.js.stream_info(conn.names.stream)
        assert info.config.name == conn.names.stream
        assert conn.nc.client_id is not None
    finally:
        await conn.close()


async def test_a_server_certificate_from_another_ca_is_a_clear_error(
    tls_url: str, pki: dict[str, Path]
) -> None:
    settings = config(
        tls_url, tls_ca=pki["other_ca"], tls_cert=pki["client_cert"], tls_key=pki["client_key"]
    )
    with pytest.raises(NatsConnectError, match=r"nats\.tls_ca"):
        await connect(settings)


async def test_a_missing_client_certificate_is_refused(tls_url: str, pki: dict[str, Path]) -> None:
    with pytest.raises(NatsConnectError, match="cannot connect to NATS"):
        await connect(config(tls_url, tls_ca=pki["ca"]))


async def test_token_auth(tmp_path: Path) -> None:
    with NatsServer(
        tmp_path / "js", port=0, authorization='authorization { token: "s3cret-token" }\n'
    ) as server:
        conn = await connect(config(server.url, token=SecretStr("s3cret-token")))
        await conn.close()
        with pytest.raises(NatsConnectError, match=r"(?i)authorization"):
            await connect(config(server.url, token=SecretStr("wrong")))
