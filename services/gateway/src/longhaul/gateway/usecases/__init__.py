"""What the gateway's routes do, as plain functions over the runtime's stores (no FastAPI):
a router parses, authenticates and calls one of these."""
