"""One NATS connection with its JetStream context, KV handles and resource names."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

import nats
from longhaul.core import nats_speedups
from longhaul.core.provision import ProvisionSettings, provision
from longhaul.core.transient import retry_transient
from longhaul.domain.config import NatsConfig
from longhaul.domain.names import Names
from nats.aio.client import Client
from nats.js import JetStreamContext
from nats.js.kv import KeyValue
from nats.js.object_store import ObjectStore

log = logging.getLogger(__name__)


@dataclass
class Connection:
    nc: Client
    js: JetStreamContext
    names: Names
    _kv: dict[str, KeyValue] = field(default_factory=dict)
    _obj: ObjectStore | None = None

    async def kv(self, bucket: str) -> KeyValue:
        handle = self._kv.get(bucket)
        if handle is None:
            handle = await self.js.key_value(bucket)
            self._kv[bucket] = handle
        return handle

    async def artifacts(self) -> ObjectStore:
        if self._obj is None:
            self._obj = await self.js.object_store(self.names.artifacts)
        return self._obj

    async def close(self) -> None:
        if not self.nc.is_closed:
            await self.nc.drain()


async def connect(
    config: NatsConfig,
    *,
    name: str = "longhaul",
    provision_settings: ProvisionSettings | None = None,
) -> Connection:
    """Connect, and provision the JetStream resources when ``provision_settings`` is given."""
    nats_speedups.install()

    async def on_error(exc: Exception) -> None:
        log.warning("nats error: %s", exc)

    nc = await nats.connect(
        config.servers,
        name=name,
        user_credentials=config.credentials,
        user=config.user,
        password=config.password.get_secret_value() if config.password else None,
        connect_timeout=config.connect_timeout_s,
        max_reconnect_attempts=-1,
        reconnect_time_wait=0.5,
        error_cb=on_error,
    )
    js = nc.jetstream(timeout=config.request_timeout_s)
    names = Names(config.namespace)
    if provision_settings is not None:
        # A cluster that just started (or lost its meta leader) answers "not now" for a while.
        await retry_transient(
            lambda: provision(js, names, provision_settings), what="provisioning JetStream"
        )
    return Connection(nc=nc, js=js, names=names)
