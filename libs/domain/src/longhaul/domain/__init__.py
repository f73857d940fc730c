"""longhaul.domain: the pure half of longhaul — events, state folds, config, ids and names.

Nothing here imports NATS, so `longhaul.agent` and `longhaul.llm` build on it without pulling
in a client or a server binary; `longhaul.core` adds the JetStream half on top.
"""
