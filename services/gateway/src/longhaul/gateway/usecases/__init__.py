"""What the gateway's routes do, as plain functions without FastAPI: a router parses the
request, calls a use case and shapes the answer."""
