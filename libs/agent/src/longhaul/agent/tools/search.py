"""``web_search``: search the web through the operator's backend (``tools.web_search``).

Offered only when configured. Backends speak their own wire format over httpx:

- ``searxng``: ``GET <url>/search?q=…&format=json`` (the instance must list ``json`` under
  ``search.formats``; otherwise it answers 403); results ``{title, url, content,
  publishedDate}``.
- ``tavily``: ``POST https://api.tavily.com/search`` with ``Authorization: Bearer
  $TAVILY_API_KEY`` and ``{query, max_results}``; results ``{title, url, content,
  published_date}``; errors ``{"detail": {"error": …}}``.
- ``brave``: ``GET https://api.search.brave.com/res/v1/web/search?q=…&count=…`` with
  ``X-Subscription-Token: $BRAVE_API_KEY``; results under ``web.results`` ``{title, url,
  description, page_age | age}``; errors ``{"error": {"code", "detail"}}``.

Every answer is title, URL, snippet and date (where the backend gives one). A 429 becomes the
tool error ``rate_limited`` with the backend's ``Retry-After``; a refused key
``search_unauthorized``; anything else ``search_failed`` with the backend's own message.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Annotated, Any, Protocol

import httpx
from longhaul.agent.errors import ToolError
from longhaul.agent.tools.base import Tool, make_tool
from longhaul.agent.tools.result import ToolResult
from longhaul.domain.config import WebSearchConfig
from pydantic import Field

TAVILY_URL = "https://api.tavily.com"
BRAVE_URL = "https://api.search.brave.com"
KEY_VARIABLES = {"tavily": "TAVILY_API_KEY", "brave": "BRAVE_API_KEY"}
SNIPPET_CHARS = 600


@dataclass(frozen=True, slots=True)
class SearchHit:
    title: str
    url: str
    snippet: str
    date: str | None = None


class Backend(Protocol):
    @property
    def name(self) -> str: ...

    def request(self, query: str, count: int) -> httpx.Request: ...

    def hits(self, body: Any) -> list[SearchHit]: ...


def _text(value: Any) -> str:
    return value.strip() if isinstance(value, str) else ""


@dataclass(frozen=True)
class SearXNG:
    url: str
    name: str = "searxng"

    def request(self, query: str, count: int) -> httpx.Request:
        return httpx.Request(
            "GET",
            self.url.rstrip("/") + "/search",
            params={"q": query, "format": "json"},
            headers={"Accept": "application/json"},
        )

    def hits(self, body: Any) -> list[SearchHit]:
        return _hits(body.get("results"), snippet="content", dates=("publishedDate",))


@dataclass(frozen=True)
class Tavily:
    key: str
    url: str = TAVILY_URL
    name: str = "tavily"

    def request(self, query: str, count: int) -> httpx.Request:
        return httpx.Request(
            "POST",
            self.url.rstrip("/") + "/search",
            json={"query": query, "max_results": count, "search_depth": "basic"},
            headers={"Authorization": f"Bearer {self.key}"},
        )

    def hits(self, body: Any) -> list[SearchHit]:
        return _hits(body.get("results"), snippet="content", dates=("published_date",))


@dataclass(frozen=True)
class Brave:
    key: str
    url: str = BRAVE_URL
    name: str = "brave"

    def request(self, query: str, count: int) -> httpx.Request:
        return httpx.Request(
            "GET",
            self.url.rstrip("/") + "/res/v1/web/search",
            params={"q": query, "count": count},
            headers={"Accept": "application/json", "X-Subscription-Token": self.key},
        )

    def hits(self, body: Any) -> list[SearchHit]:
        results = (body.get("web") or {}).get("results")
        return _hits(results, snippet="description", dates=("page_age", "age"))


def _hits(items: Any, *, snippet: str, dates: tuple[str, ...]) -> list[SearchHit]:
    """Title, url, snippet and the first date field present, of each result item."""
    return [
        SearchHit(
            _text(item.get("title")),
            _text(item.get("url")),
            _text(item.get(snippet)),
            next((_text(item.get(key)) for key in dates if _text(item.get(key))), None),
        )
        for item in items or []
    ]


def backend_for(config: WebSearchConfig, environ: Mapping[str, str]) -> Backend:
    """The configured backend; ``ValueError`` naming the variable when a key is missing."""
    if config.provider == "searxng":
        assert config.url is not None  # the config refuses searxng without one
        return SearXNG(config.url)
    variable = KEY_VARIABLES[config.provider]
    key = environ.get(variable, "").strip()
    if not key:
        raise ValueError(f"tools.web_search: provider {config.provider} needs {variable} set")
    if config.provider == "tavily":
        return Tavily(key, config.url or TAVILY_URL)
    return Brave(key, config.url or BRAVE_URL)


def _detail(response: httpx.Response) -> tuple[str, str]:
    """The backend's own error message and code (Tavily ``detail.error``, Brave
    ``error.detail`` / ``error.code``; SearXNG answers HTML: its reason phrase)."""
    try:
        body = response.json()
    except (json.JSONDecodeError, UnicodeDecodeError):
        return response.reason_phrase, ""
    if isinstance(body, dict):
        detail = body.get("detail")
        if isinstance(detail, dict):
            return str(detail.get("error") or detail), ""
        error = body.get("error")
        if isinstance(error, dict):
            return str(error.get("detail") or error), str(error.get("code") or "")
        if detail or error:
            return str(detail or error), ""
    return str(body)[:300], ""


def _retry_after(response: httpx.Response) -> str | None:
    """``Retry-After``, else the first window of Brave's ``X-RateLimit-Reset`` (seconds)."""
    after = response.headers.get("retry-after")
    if after is None and "x-ratelimit-reset" in response.headers:
        after = response.headers["x-ratelimit-reset"].split(",")[0].strip()
    return after


def _refusal(backend: Backend, response: httpx.Response) -> ToolError:
    status = response.status_code
    detail, code = _detail(response)
    if status == 429:
        after = _retry_after(response)
        wait = f"; retry after {after} s" if after else ""
        return ToolError(
            f"{backend.name} search is rate limited ({detail}){wait}", code="rate_limited"
        )
    if status in (401, 403) or code == "SUBSCRIPTION_TOKEN_INVALID":
        if backend.name == "searxng" and status == 403:
            detail += " (does the instance list json under search.formats?)"
        return ToolError(
            f"{backend.name} refused the search ({status}: {detail})", code="search_unauthorized"
        )
    return ToolError(f"{backend.name} search failed ({status}: {detail})", code="search_failed")


def render(query: str, hits: list[SearchHit]) -> str:
    if not hits:
        return f"No results for {query!r}."
    lines = [f"Results for {query!r}:"]
    for number, hit in enumerate(hits, 1):
        snippet = hit.snippet[:SNIPPET_CHARS] + ("…" if len(hit.snippet) > SNIPPET_CHARS else "")
        dated = f" ({hit.date})" if hit.date else ""
        lines.append(f"\n{number}. {hit.title or hit.url}{dated}\n   {hit.url}\n   {snippet}")
    return "\n".join(lines)


def web_search_tool(config: WebSearchConfig, environ: Mapping[str, str]) -> Tool:
    """The ``web_search`` tool bound to the configured backend."""
    backend = backend_for(config, environ)
    timeout = httpx.Timeout(config.timeout_s, connect=min(10.0, config.timeout_s))

    async def web_search(
        query: Annotated[str, Field(min_length=1, max_length=400)],
        max_results: Annotated[int, Field(ge=1, le=20)] | None = None,
    ) -> ToolResult:
        """Search the web; answers each result's title, URL, snippet and date. Read a page
        with webfetch.

        Args:
            query: what to look for (the engine's syntax works, e.g. site:example.org).
            max_results: how many results to return (1-20; default set by the operator).
        """
        count = max_results or config.max_results
        try:
            async with httpx.AsyncClient(timeout=timeout) as client:
                response = await client.send(backend.request(query, count))
        except httpx.HTTPError as exc:
            raise ToolError(
                f"{backend.name} search failed: {type(exc).__name__}: {exc}",
                code="search_failed",
            ) from exc
        if response.status_code >= 400:
            raise _refusal(backend, response)
        try:
            hits = backend.hits(response.json())[:count]
        except (json.JSONDecodeError, UnicodeDecodeError, AttributeError) as exc:
            raise ToolError(
                f"{backend.name} answered something that is not its JSON results ({exc})",
                code="search_failed",
            ) from exc
        return ToolResult(
            output=render(query, hits),
            title=f"search {query}",
        )

    return make_tool(web_search, name="web_search", read_only=True)
