"""Idempotent creation/update of every JetStream resource longhaul uses.

The resources are listed in docs/ARCHITECTURE.md §3.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from longhaul.domain.names import Names
from nats.js import JetStreamContext, api
from nats.js.errors import BadRequestError, NotFoundError

log = logging.getLogger(__name__)

DUPLICATE_WINDOW_S = 120.0
NOTIFICATIONS_TTL_S = 30 * 86_400.0
"""A delivery's record is kept a month: long enough to answer "was I told?"."""


@dataclass(frozen=True)
class ProvisionSettings:
    replicas: int = 1
    checkpoint_ttl_s: float = 604_800.0
    workspace_history: int = 10
    max_msg_size: int = 8 * 1024 * 1024


def event_stream_config(names: Names, settings: ProvisionSettings) -> api.StreamConfig:
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
        discard=api.DiscardPolicy.NEW,
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
    """Create the stream, or update it when it exists with other settings."""
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
    await ensure_stream(js, event_stream_config(names, settings))
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
    ]
    for config in buckets:
        await ensure_stream(js, config)
    await js.create_object_store(
        names.artifacts,
        config=api.ObjectStoreConfig(
            bucket=names.artifacts,
            description="large payloads",
            replicas=settings.replicas,
            storage=api.StorageType.FILE,
        ),
    )
