"""The protocols outside clients speak — OpenAI's ``/v1``, MCP (``/mcp``) and A2A (``/a2a``) —
each a thin adapter over the gateway's use cases, following a run through
:mod:`~longhaul.gateway.protocols.run_outcome`."""
