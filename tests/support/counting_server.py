"""Small real HTTP servers on loopback (a thread each) for what a test must observe from the
server's side: that something was (or was not) fetched, or a peer answering a fixed shape."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class JsonHandler(BaseHTTPRequestHandler):
    """Answers JSON; quiet (no request log on stderr)."""

    def answer(self, status: int, body: Any) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: Any) -> None:
        pass


@contextmanager
def serving(handler: type[BaseHTTPRequestHandler]) -> Iterator[str]:
    """``handler`` served on a free loopback port; yields the base URL."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@contextmanager
def counting_server(body: Any = None) -> Iterator[tuple[str, list[str]]]:
    """``(base URL, the paths requested so far)``; every GET answers ``body`` as JSON."""
    hits: list[str] = []

    class Counting(JsonHandler):
        def do_GET(self) -> None:
            hits.append(self.path)
            self.answer(200, {"type": "object"} if body is None else body)

    with serving(Counting) as url:
        yield url, hits
