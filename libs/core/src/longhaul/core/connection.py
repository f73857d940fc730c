"""One NATS connection with its JetStream context, KV handles and resource names."""

from __future__ import annotations

import asyncio
import logging
import ssl
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import nats
from longhaul.core import nats_publish_async, nats_speedups
from longhaul.core.config import NatsConfig
from longhaul.core.direct_get import read_object
from longhaul.core.provision import ProvisionSettings, atomic_batches, provision
from longhaul.core.transient import retry_transient
from longhaul.domain.names import Names
from nats.aio.client import Client
from nats.js import JetStreamContext
from nats.js.kv import KeyValue
from nats.js.object_store import ObjectStore

log = logging.getLogger(__name__)

# How long closing waits for subscriptions to hand over what they hold (nats-py's default is
# 30 s): a subscription nobody reads any more must not hold a shutdown for that long.
DRAIN_TIMEOUT_S = 5


@dataclass
class Connection:
    nc: Client
    js: JetStreamContext
    names: Names
    request_timeout_s: float = 5.0
    """How long a JetStream request (a publish's acknowledgement) may take."""
    unavailable_retry_s: float = 20.0
    """How long appends and reads wait out a leader election (``NatsConfig``)."""
    atomic_batches: bool = False
    """Several events are appended as one atomic batch (found at connect: the server and the
    event stream allow it), else one by one."""
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

    async def read_artifact(self, name: str) -> bytes:
        """An object's bytes. Read into a buffer: nats-py's plain ``get`` concatenates the
        chunks one by one, quadratic in the size (a 50 MB snapshot took 20 s); this reads them with
        batched direct gets (:mod:`longhaul.core.direct_get`)."""
        store = await self.artifacts()
        return await read_object(self.nc, self.names.artifacts, await store.get_info(name))

    async def close(self) -> None:
        """Drain (deliver what subscriptions hold, flush what was published), then close. A
        connection that cannot drain (the server is gone and it is reconnecting, or draining
        times out) is closed outright: left open, it would try to reconnect for ever."""
        if self.nc.is_closed:
            return
        try:
            await self.nc.drain()
        except (nats.errors.Error, TimeoutError) as exc:
            log.warning("nats connection closed without draining: %s", exc or type(exc).__name__)
        if self.nc.is_closed:
            return
        if not self.nc.is_connected:
            # What nats-py buffered while reconnecting can never be sent now, and its close()
            # would flush it into the dead socket and fail before stopping its subscriptions'
            # tasks (nats-py's Client._close).
            self.nc._pending.clear()
            self.nc._pending_data_size = 0
        try:
            await self.nc.close()
        except OSError as exc:
            log.warning("nats connection closed with an error: %s", exc)


async def connect(
    config: NatsConfig,
    *,
    name: str = "longhaul",
    provision_settings: ProvisionSettings | None = None,
) -> Connection:
    """Connect, and provision the JetStream resources when ``provision_settings`` is given."""
    nats_speedups.install()
    nats_publish_async.install()

    # A server that is not up yet is waited for (the client retries); a refusal that retrying
    # cannot fix (TLS, credentials) ends the first connect at once with a clear error.
    refused: asyncio.Future[BaseException] = asyncio.get_running_loop().create_future()

    async def on_error(exc: Exception) -> None:
        log.warning("nats error: %s", exc)
        if not refused.done() and _needs_a_person(exc):
            refused.set_result(exc)

    connecting: asyncio.Future[Client] = asyncio.ensure_future(_open(config, name, on_error))
    waiting: set[asyncio.Future[Any]] = {connecting, refused}
    await asyncio.wait(waiting, return_when=asyncio.FIRST_COMPLETED)
    if not connecting.done():
        connecting.cancel()
        await asyncio.gather(connecting, return_exceptions=True)
        raise NatsConnectError(_explain(config, refused.result()))
    try:
        nc = connecting.result()
    except (ssl.SSLError, OSError, nats.errors.Error) as exc:
        raise NatsConnectError(_explain(config, exc)) from exc
    js = nc.jetstream(timeout=config.request_timeout_s)
    names = Names(config.namespace)
    if provision_settings is not None:
        # A cluster that just started (or lost its meta leader) answers "not now" for a while.
        await retry_transient(
            lambda: provision(js, names, provision_settings), what="provisioning JetStream"
        )
    return Connection(
        nc=nc,
        js=js,
        names=names,
        request_timeout_s=config.request_timeout_s,
        unavailable_retry_s=config.unavailable_retry_s,
        atomic_batches=config.atomic_batches is not False
        and await retry_transient(
            lambda: atomic_batches(js, names, replicated_only=config.atomic_batches == "auto"),
            what="reading the event stream",
        ),
    )


class NatsConnectError(ConnectionError):
    """The first connection failed for a reason a person must fix (address, TLS, credentials);
    the message says which setting to look at."""


def tls_context(config: NatsConfig) -> ssl.SSLContext | None:
    """A client TLS context from ``nats.tls_*`` (None when no TLS setting is given)."""
    if not (
        config.tls_ca or config.tls_cert or any(u.startswith("tls://") for u in config.servers)
    ):
        return None
    context = ssl.create_default_context(cafile=str(config.tls_ca) if config.tls_ca else None)
    if config.tls_cert:
        context.load_cert_chain(
            str(config.tls_cert), str(config.tls_key) if config.tls_key else None
        )
    return context


def _needs_a_person(exc: BaseException) -> bool:
    text = str(exc).lower()
    return isinstance(exc, ssl.SSLError) or "authorization" in text or "certificate" in text


def _explain(config: NatsConfig, exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}"
    if isinstance(exc, ssl.SSLError) or "CERTIFICATE" in text.upper():
        hint = "check nats.tls_ca (the CA the server's certificate is signed by), tls_cert, tls_key"
    elif "authorization" in text.lower():
        hint = "check nats.user/password, token, nkeys_seed or credentials"
    else:
        hint = "check nats.url and that the server is running"
    return f"cannot connect to NATS at {config.url}: {text} ({hint})"


async def _open(
    config: NatsConfig, name: str, on_error: Callable[[Exception], Awaitable[None]]
) -> Client:
    return await nats.connect(
        config.servers,
        name=name,
        user_credentials=config.credentials,
        user=config.user,
        password=config.password.get_secret_value() if config.password else None,
        token=config.token.get_secret_value() if config.token else None,
        nkeys_seed=str(config.nkeys_seed) if config.nkeys_seed else None,
        tls=tls_context(config),
        connect_timeout=config.connect_timeout_s,
        drain_timeout=DRAIN_TIMEOUT_S,
        max_reconnect_attempts=-1,
        reconnect_time_wait=0.5,
        error_cb=on_error,
    )
