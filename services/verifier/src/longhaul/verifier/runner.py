"""``python -m longhaul.verifier.runner <spool>``: keeps one verification command.

It imports nothing heavy (a verification waits for its start). The verifier starts this
keeper in a session of its own, so a ``kill -9`` of the verifier
neither kills the command nor loses what it printed: the keeper runs the command (confined,
limited, dying with the keeper), captures its capped output and writes ``result.json`` into
the spool. A verifier that picks the request up again finds the running keeper by its lock or
the finished result, and never starts the command a second time (see
:mod:`longhaul.verifier.command_spool`).
"""

from __future__ import annotations

import asyncio
import functools
import sys
from pathlib import Path

import msgspec
from longhaul.agent.tools.childproc import limit_child
from longhaul.verifier.command_spool import STARTED, Job, Outcome, write_atomically
from longhaul.verifier.execute import execute


def main() -> None:
    spool = Path(sys.argv[1])
    job = msgspec.json.decode((spool / Job.FILE).read_bytes(), type=Job)
    answer = (spool / Job.STDIN).read_bytes()
    write_atomically(spool / STARTED, b"")  # from here on, the command may have had effects
    try:
        finished = asyncio.run(
            execute(
                job.argv,
                answer,
                cwd=job.cwd,
                env=job.env,
                timeout_s=job.timeout_s,
                output_cap=job.output_cap,
                preexec=functools.partial(limit_child, job.limits),
            )
        )
    except OSError as exc:
        finished = Outcome(error=f"could not start the command: {exc}")
    write_atomically(spool / Outcome.FILE, msgspec.json.encode(finished))


if __name__ == "__main__":
    main()
