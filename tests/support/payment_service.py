"""A payment service on loopback for ``examples/tools/payments.py``: it counts what it applied
per idempotency key, answers slowly (so an executor can be killed while a request is in
flight), and tells the test which requests are in flight.

Charges are applied once per ``Idempotency-Key``; refunds and payouts every time they are
asked (an unsafe effect: a blind re-run would pay twice). Every second request of a kind is
applied late: after the slow part, and only if the caller is still waiting — the way a
service drops an abandoned request — so both outcomes of a crash (applied, not applied)
happen. ``GET /refunds/{key}`` answers the ``refund`` tool's reconcile hook; ``applied``
is the operator's view of payouts (what a person checks before deciding).
"""

from __future__ import annotations

import json
import re
import socket
import threading
import time
from collections import Counter
from typing import Any

from tests.support.counting_server import JsonHandler

KINDS = ("charges", "refunds", "payouts")


class PaymentService:
    def __init__(self, token: str, answer_after_s: float = 0.6) -> None:
        self.token = token
        self.answer_after_s = answer_after_s
        self.lock = threading.Lock()
        self.applied: dict[str, list[dict[str, Any]]] = {kind: [] for kind in KINDS}
        self.requests: Counter[tuple[str, str]] = Counter()
        """(kind, key) -> requests received (a re-run with the same key counts again)."""
        self.in_flight: dict[str, str] = {}
        """key -> kind, while a request waits for its answer."""
        self.arrivals: Counter[str] = Counter()
        self.held_kinds: frozenset[str] = frozenset()
        self.held: dict[str, str] = {}
        """key -> kind, while a request of a held kind waits for :meth:`release`."""
        self.gate = threading.Event()
        self.gate.set()

    def hold(self, *kinds: str) -> None:
        """Requests of ``kinds`` arriving from now stay in flight until :meth:`release`: a test
        striking a caller mid-request finds it still in flight, however slow the box."""
        with self.lock:
            self.held_kinds = frozenset(kinds)
            self.gate.clear()

    def release(self) -> None:
        with self.lock:
            self.held_kinds = frozenset()
            self.gate.set()

    def held_of(self, kind: str) -> list[str]:
        with self.lock:
            return [key for key, k in self.held.items() if k == kind]

    def applied_for(self, kind: str, key: str) -> list[dict[str, Any]]:
        with self.lock:
            return [entry for entry in self.applied[kind] if entry["key"] == key]

    def is_in_flight(self, key: str) -> bool:
        with self.lock:
            return key in self.in_flight

    def in_flight_of(self, kind: str) -> list[str]:
        with self.lock:
            return [key for key, k in self.in_flight.items() if k == kind]

    def _apply(self, kind: str, key: str, body: dict[str, Any]) -> dict[str, Any]:
        with self.lock:
            if kind == "charges":
                for entry in self.applied[kind]:
                    if entry["key"] == key:
                        return entry  # one charge per key
            entry = {"id": f"{kind[0].upper()}-{len(self.applied[kind]) + 1}", "key": key, **body}
            self.applied[kind].append(entry)
            return entry

    def handler(self) -> type[JsonHandler]:
        service = self

        class Payments(JsonHandler):
            def _authorised(self) -> bool:
                if self.headers.get("Authorization") == f"Bearer {service.token}":
                    return True
                self.answer(401, {"error": "who are you"})
                return False

            def _caller_gone(self) -> bool:
                """A killed caller's socket reads as closed (EOF) once its process is gone."""
                self.connection.setblocking(False)
                try:
                    return self.connection.recv(1, socket.MSG_PEEK) == b""
                except BlockingIOError:
                    return False
                except OSError:
                    return True
                finally:
                    self.connection.setblocking(True)

            def _reply(self, status: int, body: Any) -> None:
                try:
                    self.answer(status, body)
                except OSError:  # the caller was killed meanwhile
                    pass

            def do_POST(self) -> None:
                kind = self.path.strip("/")
                if kind not in KINDS:
                    self.answer(404, {"error": "no such path"})
                    return
                if not self._authorised():
                    return
                length = int(self.headers.get("Content-Length", 0))
                raw = self.rfile.read(length)
                if len(raw) < length:  # the caller died mid-request: nothing to apply
                    return
                body = json.loads(raw)
                key = self.headers.get("Idempotency-Key", "")
                with service.lock:
                    service.requests[(kind, key)] += 1
                    service.arrivals[kind] += 1
                    late = service.arrivals[kind] % 2 == 0
                    service.in_flight[key] = kind
                    held = kind in service.held_kinds
                    if held:
                        service.held[key] = kind
                try:
                    if held:
                        service.gate.wait()
                        with service.lock:
                            service.held.pop(key, None)
                    entry = None if late else service._apply(kind, key, body)
                    time.sleep(service.answer_after_s)  # a slow payment network
                    if late and not self._caller_gone():  # abandoned: not applied
                        entry = service._apply(kind, key, body)
                finally:
                    with service.lock:
                        service.in_flight.pop(key, None)
                if entry is not None:
                    self._reply(201, entry)

            def do_GET(self) -> None:
                if not self._authorised():
                    return
                found = re.fullmatch(r"/refunds/(.+)", self.path)
                if found is None:
                    self.answer(404, {"error": "no such path"})
                    return
                done = service.applied_for("refunds", found.group(1))
                if done:
                    self._reply(200, done[0])
                else:
                    self._reply(404, {"error": "no refund"})

        return Payments
