"""Peers bench (``python -m bench.peers``): longhaul against LangGraph on the same workload, in
one run; see ``__main__``. Needs the ``peers`` dependency group, which ``make bench`` syncs."""
