"""What the gateway does, as plain functions over the repositories: start a run, steer it,
put files in it, erase it, import and export it, start a scheduled or triggered run.

Nothing here knows FastAPI: the routers, the protocol servers (``/v1``, ``/mcp``, ``/a2a``)
and the background loops are thin adapters that call these. A use case raises
:class:`~longhaul.gateway.errors.ApiError` for a refusal each adapter renders its own way.
"""
