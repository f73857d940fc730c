"""Idempotent creation/update of every JetStream resource longhaul uses.

The resources are listed in docs/07-the-log.md.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from longhaul.domain.names import Names
from nats.js import JetStreamContext, api
from nats.js.errors import APIError, BadRequestError, NotFoundError

log = logging.getLogger(__name__)

DUPLICATE_WINDOW_S = 120.0
NOTIFICATIONS_TTL_S = 30 * 86_400.0
"""A delivery's record is kept a month: long enough to answer "was I told?"."""
CANNOT_RESERVE = 10047
"""JetStream's "insufficient storage resources available": a limit past what it can reserve."""


@dataclass(frozen=True)
class ProvisionSettings:
    replicas: int = 1
    checkpoint_ttl_s: float = 604_800.0
    workspace_history: int = 10
    max_msg_size: int = 8 * 1024 * 1024
    max_bytes: int | None = None
    """The event stream's size limit (``store.max_bytes``; None: left as it is)."""
    object_max_bytes: int | None = None
    """The object store's (``store.object_max_bytes``)."""


ATOMIC_SINCE = (2, 12)
"""The first nats-server with atomic batch publishes (ADR-50)."""


def event_stream_config(
    names: Names, settings: ProvisionSettings, *, atomic: bool = True
) -> api.StreamConfig:
    """``atomic``: the server has atomic batches (an older one would refuse the setting)."""
    return api.StreamConfig(
        name=names.stream,
        description="longhaul domain events",
        subjects=[f"{names.subject_root}.>"],
        retention=api.RetentionPolicy.LIMITS,
        storage=api.StorageType.FILE,
        num_replicas=settings.replicas,
        duplicate_window=DUPLICATE_WINDOW_S,
        max_msg_size=settings.max_msg_size,
        allow_direct=True,
        # at max_bytes the publish is refused: never ``old``, which drops the oldest events
        discard=api.DiscardPolicy.NEW,
        max_bytes=settings.max_bytes,
        # a step's events are stored as one batch, all or none (docs/07-the-log.md)
        allow_atomic=True if atomic else None,
    )


def object_stream_config(names: Names, settings: ProvisionSettings) -> api.StreamConfig:
    """The object store's backing stream, the way nats-py's ``create_object_store`` shapes
    it, with the size limit (``discard: new`` too: a refused chunk fails the put)."""
    bucket = names.artifacts
    return api.StreamConfig(
        name=f"OBJ_{bucket}",
        description="large payloads",
        subjects=[f"$O.{bucket}.C.>", f"$O.{bucket}.M.>"],
        max_bytes=settings.object_max_bytes,
        duplicate_window=DUPLICATE_WINDOW_S,  # the server's default, said so the look matches
        storage=api.StorageType.FILE,
        num_replicas=settings.replicas,
        discard=api.DiscardPolicy.NEW,
        allow_rollup_hdrs=True,
        allow_direct=True,
    )


def _limit_notice(config: api.StreamConfig, setting: str) -> None:
    """Say at start-up what bounds the stream, and what happens when it is reached."""
    if config.max_bytes:
        log.info(
            "stream %s is limited to %d bytes (%s): when it fills, new runs answer 507 "
            "and running traces stop with storage_full",
            config.name,
            config.max_bytes,
            setting,
        )
    else:
        log.warning(
            "stream %s has no size limit of longhaul's (%s unset): only nats-server's "
            "max_file_store bounds it; set it to see the disk fill before it is full",
            config.name,
            setting,
        )


def kv_stream_config(
    bucket: str,
    settings: ProvisionSettings,
    *,
    history: int = 1,
    ttl_s: float | None = None,
    description: str = "",
) -> api.StreamConfig:
    """The backing stream of a KV bucket, the way nats-py's ``create_key_value`` shapes it."""
    return api.StreamConfig(
        name=f"KV_{bucket}",
        description=description,
        subjects=[f"$KV.{bucket}.>"],
        allow_direct=True,
        allow_rollup_hdrs=True,
        allow_msg_ttl=True,
        deny_delete=True,
        discard=api.DiscardPolicy.NEW,
        duplicate_window=min(DUPLICATE_WINDOW_S, ttl_s) if ttl_s else DUPLICATE_WINDOW_S,
        max_age=ttl_s,
        max_msgs_per_subject=history,
        max_msg_size=settings.max_msg_size,
        num_replicas=settings.replicas,
        storage=api.StorageType.FILE,
    )


async def ensure_stream(js: JetStreamContext, config: api.StreamConfig) -> None:
    """Create the stream, or update it when it exists with other settings. A size limit the
    server cannot reserve (err 10047: the streams' limits add up past its ``max_file_store``)
    is left out, loudly, rather than keeping the service from starting."""
    try:
        await _ensure(js, config)
    except APIError as exc:
        if exc.err_code != CANNOT_RESERVE or not config.max_bytes:
            raise
        log.error(
            "stream %s: nats-server cannot reserve %d bytes (%s): lower the size limit "
            "(store.max_bytes / store.object_max_bytes); going on without it",
            config.name,
            config.max_bytes,
            exc.description,
        )
        config.max_bytes = None
        await _ensure(js, config)


async def _ensure(js: JetStreamContext, config: api.StreamConfig) -> None:
    try:
        info = await js.stream_info(config.name or "")
    except NotFoundError:
        await js.add_stream(config)
        log.info("created stream %s", config.name)
        return
    current = info.config
    wanted = {k: v for k, v in config.as_dict().items() if v is not None}
    have = current.as_dict()
    if any(have.get(key) != value for key, value in wanted.items()):
        try:
            await js.update_stream(config)
            log.info("updated stream %s", config.name)
        except BadRequestError as exc:
            # Some settings (storage type, replicas on a single server) cannot change in place.
            log.warning("stream %s kept its settings: %s", config.name, exc.description)


async def provision(
    js: JetStreamContext, names: Names, settings: ProvisionSettings | None = None
) -> None:
    """Create or update the event stream, the KV buckets and the object store."""
    settings = settings or ProvisionSettings()
    events = event_stream_config(names, settings, atomic=has_atomic_batches(js))
    await ensure_stream(js, events)
    _limit_notice(events, "store.max_bytes")
    buckets = [
        kv_stream_config(names.traces, settings, description="trace index"),
        kv_stream_config(names.active, settings, description="traces not final yet"),
        kv_stream_config(names.leases, settings, description="executor leases (per-key TTL)"),
        kv_stream_config(names.snapshots, settings, description="folded state snapshots"),
        kv_stream_config(
            names.checkpoints,
            settings,
            ttl_s=settings.checkpoint_ttl_s,
            description="task phase checkpoints",
        ),
        kv_stream_config(
            names.workspace,
            settings,
            history=max(5, settings.workspace_history),
            description="shared workspace",
        ),
        kv_stream_config(names.experiences, settings, description="experiences, per API key"),
        kv_stream_config(names.evals, settings, description="eval runs, per API key"),
        kv_stream_config(
            names.notifications,
            settings,
            ttl_s=NOTIFICATIONS_TTL_S,
            description="notification deliveries, per run",
        ),
        kv_stream_config(names.schedules, settings, description="schedules and triggers"),
        kv_stream_config(names.circuits, settings, description="circuit breaker per provider"),
        kv_stream_config(names.spend, settings, description="spend per key and UTC day"),
    ]
    for config in buckets:
        await ensure_stream(js, config)
    objects = object_stream_config(names, settings)
    await ensure_stream(js, objects)
    _limit_notice(objects, "store.object_max_bytes")


def has_atomic_batches(js: JetStreamContext) -> bool:
    """Whether the connected nats-server is one with atomic batches (2.12+)."""
    version = js._nc.connected_server_version
    try:
        return (version.major, version.minor) >= ATOMIC_SINCE
    except ValueError:  # not semver: a development build, assumed current
        return True


async def atomic_batches(
    js: JetStreamContext, names: Names, *, replicated_only: bool = False
) -> bool:
    """Whether a step's events are stored as one atomic batch: the server has them and the
    event stream allows them (and, ``replicated_only``, has more than one replica). Said once,
    at start: without them events are appended one by one, as before (an older server, or a
    stream an older build created and nothing has provisioned since: the next start that
    provisions upgrades it in place)."""
    if not has_atomic_batches(js):
        log.warning(
            "nats-server %s has no atomic batch publish (2.12+): a step's events are "
            "appended one by one",
            js._nc.connected_server_version._server_version,
        )
        return False
    try:
        info = await js.stream_info(names.stream)
    except NotFoundError:
        log.warning("stream %s does not exist yet: events are appended one by one", names.stream)
        return False
    if not info.config.allow_atomic:
        log.warning(
            "stream %s was created without allow_atomic (by an older build?): a step's events "
            "are appended one by one; start a service that provisions to upgrade it in place",
            names.stream,
        )
        return False
    if replicated_only and (info.config.num_replicas or 1) < 2:
        # nats-server 2.15 stages a one-replica file stream's batch in a new on-disk store
        # (jetstream_batching.go, newBatchStore): ~10x slower than appending one by one.
        log.info(
            "stream %s has one replica: a step's events are appended one by one "
            "(nats.atomic_batches: true commits them as one batch, at a cost)",
            names.stream,
        )
        return False
    log.info("stream %s: a step's events are appended as one atomic batch", names.stream)
    return True
