"""``longhaul up``'s default storage limits: sized to the disk its embedded nats-server
writes to, so the disk never fills before longhaul sees it coming.

Of what JetStream could have (free space plus what it holds already) 40% goes to the event
stream and 20% to the object store: nats-server reserves each stream's limit out of its own
(75% of the free disk when it starts), and the KV buckets and the rest of the machine need
the remainder. A limit set in the configuration is kept.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from longhaul.core.config import LonghaulConfig
from longhaul.core.storage import human

EVENTS_SHARE = 0.4
OBJECTS_SHARE = 0.2


def _held(directory: Path) -> int:
    return sum(p.stat().st_size for p in directory.rglob("*") if p.is_file())


def sized_to_disk(config: LonghaulConfig, store_dir: Path) -> tuple[dict[str, str], str]:
    """The environment that sets the limits the configuration leaves open, and the line
    that says so at start-up."""
    store_dir.mkdir(parents=True, exist_ok=True)
    room = shutil.disk_usage(store_dir).free + _held(store_dir)
    env: dict[str, str] = {}
    sized = {
        "MAX_BYTES": (config.store.max_bytes, EVENTS_SHARE),
        "OBJECT_MAX_BYTES": (config.store.object_max_bytes, OBJECTS_SHARE),
    }
    limits = []
    for key, (configured, share) in sized.items():
        limit = int(configured) if configured is not None else int(room * share)
        if configured is None:
            env[f"LONGHAUL_STORE__{key}"] = str(limit)
        limits.append(limit)
    events, objects = limits
    source = f"sized to {human(room)} of disk under {store_dir}" if env else "configured"
    line = (
        f"storage:   events ≤ {human(events)}, objects ≤ {human(objects)} "
        f"({source}; store.max_bytes, store.object_max_bytes)"
    )
    return env, line
