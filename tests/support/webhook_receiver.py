"""A webhook receiver on loopback (a real HTTP server in a thread) for notification tests: it
records every request, fails the first ``fail_first`` attempts of each delivery id (500), can
be taken ``down`` (503 for everything), answers the paths in ``hold`` only after that many
seconds (a slow receiver), and wakes waiting tests when a request arrives."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from tests.support.counting_server import JsonHandler, serving


@dataclass(frozen=True)
class Received:
    path: str
    headers: dict[str, str]
    body: bytes
    answered: int

    @property
    def delivery_id(self) -> str:
        return self.headers.get("x-longhaul-delivery-id", "")

    def json(self) -> Any:
        return json.loads(self.body)


class Receiver:
    def __init__(self, loop: asyncio.AbstractEventLoop, fail_first: int) -> None:
        self.loop = loop
        self.fail_first = fail_first
        self.down = False
        self.hold: dict[str, float] = {}
        self.url = ""
        self.requests: list[Received] = []
        self._tries: Counter[str] = Counter()
        self._lock = threading.Lock()
        self._arrived = asyncio.Event()

    def answer(self, path: str, headers: dict[str, str], body: bytes) -> int:
        with self._lock:
            delivery = headers.get("x-longhaul-delivery-id", "")
            self._tries[delivery] += 1
            failing = self.down or self._tries[delivery] <= self.fail_first
            status = (503 if self.down else 500) if failing else 200
            self.requests.append(Received(path, headers, body, status))
        self.loop.call_soon_threadsafe(self._arrived.set)
        return status

    def delivered(self, path: str | None = None) -> list[Received]:
        """The requests answered 200 (at ``path``)."""
        with self._lock:
            return [r for r in self.requests if r.answered == 200 and path in (None, r.path)]

    def attempts(self, delivery_id: str) -> list[Received]:
        with self._lock:
            return [r for r in self.requests if r.delivery_id == delivery_id]

    async def until(self, condition: Callable[[], bool], *, within: float) -> None:
        """Return once ``condition()`` holds, re-checked at each request received."""
        async with asyncio.timeout(within):
            while not condition():
                self._arrived.clear()
                if condition():
                    return
                await self._arrived.wait()


@contextmanager
def webhook_receiver(fail_first: int = 0) -> Iterator[Receiver]:
    receiver = Receiver(asyncio.get_running_loop(), fail_first)

    class Handler(JsonHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length)
            headers = {name.lower(): value for name, value in self.headers.items()}
            status = receiver.answer(self.path, headers, body)
            time.sleep(receiver.hold.get(self.path, 0.0))  # this request's thread only
            self.answer(status, {"ok": status == 200})

    with serving(Handler) as url:
        receiver.url = url
        yield receiver
