"""Fake search APIs on real loopback HTTP servers, speaking each backend's wire format.

    async with FakeBrave(results=[Hit("Title", "https://a.example/", "snippet")]) as brave:
        config = WebSearchConfig(provider="brave", url=brave.base_url)
        ...
        assert brave.requests[0].query["q"] == "…"

Each fake checks what the real API checks (the key, the parameters) and answers errors in
the API's own shape: SearXNG 403 (an instance without the JSON format) and 429 (its limiter)
as HTML pages, Tavily ``{"detail": {"error"}}`` with 401/400/429/432, Brave
``{"type": "ErrorResponse", "error": {"code", "detail", …}}`` with 422/429 and its
``X-RateLimit-*`` headers. ``fail_next`` queues errors; :class:`Hit` is one result.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from tests.support.llm_fakes import FakeServer, RecordedRequest, _Response


@dataclass
class Hit:
    title: str
    url: str
    snippet: str
    date: str | None = None


@dataclass
class Refusal:
    """An error the fake answers next (the backend's own kind: ``rate``, ``key``…)."""

    kind: str
    headers: dict[str, str] = field(default_factory=dict)


class FakeSearch(FakeServer):
    def __init__(self, results: list[Hit] | None = None, *, api_key: str = "test-key") -> None:
        super().__init__(api_key=api_key)
        self.results = results or []
        self.pending: list[Refusal] = []

    def fail_next(self, kind: str, **headers: str) -> None:
        self.pending.append(Refusal(kind, headers))

    async def _respond(self, request: RecordedRequest, out: _Response) -> None:
        await self.answer(request, out, self.pending.pop(0) if self.pending else None)

    async def answer(
        self, request: RecordedRequest, out: _Response, refusal: Refusal | None
    ) -> None:
        raise NotImplementedError


async def _html(out: _Response, status: int, text: str) -> None:
    body = f"<html><body><h1>{text}</h1></body></html>".encode()
    head = f"HTTP/1.1 {status} {text}\r\ncontent-type: text/html\r\ncontent-length: {len(body)}"
    out._writer.write(head.encode() + b"\r\n\r\n" + body)
    await out._writer.drain()


class FakeSearXNG(FakeSearch):
    """``GET /search?q=…&format=json``; ``json_enabled=False`` is an instance whose
    settings.yml lists only html (403 for any other format)."""

    def __init__(self, results: list[Hit] | None = None, *, json_enabled: bool = True) -> None:
        super().__init__(results)
        self.json_enabled = json_enabled

    async def answer(
        self, request: RecordedRequest, out: _Response, refusal: Refusal | None
    ) -> None:
        if request.path not in ("/search", "/"):
            await _html(out, 404, "Not Found")
        elif request.query.get("format", "html") != "html" and not self.json_enabled:
            await _html(out, 403, "Forbidden")
        elif refusal is not None:
            await _html(out, 429, "Too Many Requests")
        elif not request.query.get("q"):
            await _html(out, 400, "Bad Request")
        else:
            results = [
                {
                    "url": hit.url,
                    "title": hit.title,
                    "content": hit.snippet,
                    "publishedDate": hit.date,
                    "engine": "duckduckgo",
                    "engines": ["duckduckgo"],
                    "parsed_url": ["https", hit.url.split("/")[2], "/", "", "", ""],
                    "template": "default.html",
                    "positions": [rank],
                    "score": 1.0 / rank,
                    "category": "general",
                }
                for rank, hit in enumerate(self.results, 1)
            ]
            await out.json(
                200,
                {
                    "query": request.query["q"],
                    "number_of_results": 0,
                    "results": results,
                    "answers": [],
                    "corrections": [],
                    "infoboxes": [],
                    "suggestions": [],
                    "unresponsive_engines": [],
                },
            )


class FakeTavily(FakeSearch):
    """``POST /search`` with ``Authorization: Bearer <key>`` and a JSON body."""

    async def answer(
        self, request: RecordedRequest, out: _Response, refusal: Refusal | None
    ) -> None:
        def error(status: int, message: str, headers: dict[str, str] | None = None) -> Any:
            return out.json(status, {"detail": {"error": message}}, headers)

        if request.method != "POST" or request.path != "/search":
            await error(404, "Not Found")
            return
        if request.headers.get("authorization") != f"Bearer {self.api_key}":
            await error(401, "Unauthorized: missing or invalid API key.")
            return
        if refusal is not None and refusal.kind == "rate":
            await error(
                429,
                "Your request has been blocked due to excessive requests. "
                "Please reduce rate of requests.",
                refusal.headers,
            )
            return
        if refusal is not None and refusal.kind == "plan":
            await error(432, "This request exceeds your plan's set usage limit.")
            return
        body = request.json
        if not isinstance(body, dict) or not body.get("query"):
            await error(400, "Query is missing.")
            return
        count = body.get("max_results", 5)
        if not isinstance(count, int) or not 0 <= count <= 20:
            await error(400, "max_results must be between 0 and 20.")
            return
        results = [
            {
                "url": hit.url,
                "title": hit.title,
                "content": hit.snippet,
                "score": 0.9 - rank / 100,
                "raw_content": None,
                **({"published_date": hit.date} if hit.date else {}),
            }
            for rank, hit in enumerate(self.results[:count])
        ]
        await out.json(
            200,
            {
                "query": body["query"],
                "follow_up_questions": None,
                "answer": None,
                "images": [],
                "results": results,
                "response_time": 0.42,
                "request_id": "fake-request",
            },
        )


class FakeBrave(FakeSearch):
    """``GET /res/v1/web/search?q=…&count=…`` with ``X-Subscription-Token``."""

    async def answer(
        self, request: RecordedRequest, out: _Response, refusal: Refusal | None
    ) -> None:
        def error(
            status: int, code: str, detail: str, headers: dict[str, str] | None = None
        ) -> Any:
            body = {
                "type": "ErrorResponse",
                "error": {
                    "id": "fake-error",
                    "status": status,
                    "code": code,
                    "detail": detail,
                    "meta": {"component": "authentication"},
                },
                "time": int(time.time()),
            }
            return out.json(status, body, headers)

        if request.path != "/res/v1/web/search":
            await error(404, "NOT_FOUND", "Resource not found.")
            return
        if request.headers.get("x-subscription-token") != self.api_key:
            await error(
                422, "SUBSCRIPTION_TOKEN_INVALID", "The provided subscription token is invalid."
            )
            return
        if refusal is not None:
            await error(
                429,
                "RATE_LIMITED",
                "Request rate limit exceeded for plan.",
                {
                    "X-RateLimit-Limit": "1, 2000",
                    "X-RateLimit-Remaining": "0, 1990",
                    "X-RateLimit-Reset": "1, 1419704",
                    **refusal.headers,
                },
            )
            return
        count = int(request.query.get("count", "20"))
        if not request.query.get("q") or not 1 <= count <= 20:
            await error(422, "VALIDATION", "Unable to validate request parameter(s).")
            return
        results = [
            {
                "title": hit.title,
                "url": hit.url,
                "is_source_local": False,
                "is_source_both": False,
                "description": hit.snippet,
                "language": "en",
                "family_friendly": True,
                "type": "search_result",
                "subtype": "generic",
                "meta_url": {"scheme": "https", "netloc": hit.url.split("/")[2], "path": ""},
                **({"page_age": hit.date, "age": hit.date} if hit.date else {}),
            }
            for hit in self.results[:count]
        ]
        await out.json(
            200,
            {
                "type": "search",
                "query": {"original": request.query["q"], "more_results_available": False},
                "mixed": {"type": "mixed", "main": [], "top": [], "side": []},
                "web": {"type": "search", "results": results, "family_friendly": True},
            },
        )
