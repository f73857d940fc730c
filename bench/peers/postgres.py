"""A throw-away PostgreSQL for the PostgresSaver runs, from Debian's packages.

``initdb`` and ``pg_ctl`` from ``/usr/lib/postgresql/<version>/bin`` (``apt-get install
postgresql``) make a cluster in a temporary directory, listening on 127.0.0.1 on a free port
with trust authentication; it is stopped and deleted afterwards. PostgreSQL refuses to run as
root, so under root the cluster runs as the ``postgres`` user the package creates.
:func:`unavailable` says why none can be started (the bench then skips PostgresSaver and prints
the reason).
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

START_TIMEOUT_S = 60


def _bin_dir() -> Path | None:
    found = sorted(Path("/usr/lib/postgresql").glob("*/bin/initdb"), key=lambda p: int(p.parts[-3]))
    return found[-1].parent if found else None


def _run_as() -> str | None:
    """The user the server runs as: ``postgres`` under root, else the current user."""
    return "postgres" if os.geteuid() == 0 else None


def unavailable() -> str | None:
    """Why no local PostgreSQL can be started, or None if one can."""
    if _bin_dir() is None:
        return (
            "no PostgreSQL server binaries under /usr/lib/postgresql (apt-get install postgresql)"
        )
    if _run_as() is not None:
        try:
            pwd.getpwnam("postgres")
        except KeyError:
            return "running as root and there is no postgres user to run the server as"
    return None


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@contextlib.contextmanager
def local_postgres() -> Iterator[str]:
    """Start a private server; yields a libpq URL (database ``postgres``)."""
    bin_dir = _bin_dir()
    assert bin_dir is not None, unavailable()
    user = _run_as()
    with tempfile.TemporaryDirectory(prefix="lh-bench-pg-") as tmp:
        root = Path(tmp)
        if user is not None:
            shutil.chown(root, user=user)
            root.chmod(0o700)
        data, port = root / "data", _free_port()

        def pg(*args: str) -> None:
            subprocess.run(
                [str(bin_dir / args[0]), *args[1:]],
                check=True,
                capture_output=True,
                user=user,
                cwd=root,
                timeout=START_TIMEOUT_S,
            )

        pg("initdb", "-D", str(data), "-U", "postgres", "--auth=trust", "--no-sync")
        options = (
            f"-p {port} -c listen_addresses=127.0.0.1 -c unix_socket_directories={root} "
            "-c fsync=on -c synchronous_commit=on"
        )
        pg("pg_ctl", "-D", str(data), "-o", options, "-l", str(root / "log"), "-w", "start")
        try:
            yield f"postgresql://postgres@127.0.0.1:{port}/postgres"
        finally:
            pg("pg_ctl", "-D", str(data), "-m", "fast", "-w", "stop")
