"""What the gateway's runtime builds once: the schedule store, per connection (a reconnected
runtime builds it again over the new connection)."""

from __future__ import annotations

from typing import cast

from longhaul.core.config import LonghaulConfig
from longhaul.core.connection import Connection
from longhaul.core.service import ServiceContext

from tests.support.runtime import offline_runtime


def test_the_schedule_store_is_built_once_per_connection() -> None:
    config = LonghaulConfig()
    rt = offline_runtime(config)
    first, second = (
        ServiceContext(name="gateway", config=config, conn=cast(Connection, object()))
        for _ in range(2)
    )
    rt.connect(first)
    store = rt.schedule_store
    assert rt.schedule_store is store and store.conn is first.conn
    rt.connect(second)
    assert rt.schedule_store is not store and rt.schedule_store.conn is second.conn
