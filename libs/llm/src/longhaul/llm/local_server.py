"""The child process behind a ``local:`` model: ``python -m longhaul.llm.local_server``.

Reads one JSON line on stdin (model path, threads, n_ctx, parallel, chat template), loads
the model into llama.cpp's HTTP server (:class:`~longhaul.llm.local.LlamaServer`) on a free
loopback port, prints ``ready <url>`` and serves until its stdin reaches EOF (the parent
closed it or died), SIGTERM, or its parent dies (``PR_SET_PDEATHSIG``). xllamacpp has no
stop call: this process ending is how a model's memory is returned.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import signal
import sys
from pathlib import Path

_PR_SET_PDEATHSIG = 1


def die_with(parent: int) -> None:
    """The kernel sends SIGKILL when the parent dies (even by SIGKILL); if it already has,
    exit now."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
    if os.getppid() != parent:
        os._exit(1)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--parent", type=int, required=True, help="pid to die with")
    args = parser.parse_args()
    die_with(args.parent)
    from longhaul.llm.local import LlamaServer, ServerSpec

    line = sys.stdin.buffer.readline()
    if not line:
        os._exit(1)
    spec = json.loads(line)
    server = LlamaServer(
        ServerSpec(
            model=Path(spec["model"]),
            threads=int(spec["threads"]),
            n_ctx=int(spec["n_ctx"]),
            parallel=int(spec["parallel"]),
            chat_template=spec.get("chat_template"),
        )
    )
    print(f"ready {server.base_url}", flush=True)
    # nothing more goes to the parent's stdout pipe, which it no longer reads
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    while sys.stdin.buffer.read(65536):
        pass
    os._exit(0)  # the server's threads are not joined: the process ending is the stop


if __name__ == "__main__":
    main()
