"""``web_search`` against local servers speaking SearXNG's, Tavily's and Brave's wire formats:
results as title, URL, snippet and date; rate limits, refused keys and a SearXNG instance
without the JSON format as clear tool errors; keys only from the environment."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from longhaul.agent.errors import ToolError
from longhaul.agent.tools import Tool, ToolResult
from longhaul.agent.tools.search import web_search_tool
from longhaul.domain.config import WebSearchConfig

from tests.support.search_fakes import FakeBrave, FakeSearch, FakeSearXNG, FakeTavily, Hit
from tests.unit.agent.support import tool_context

HITS = [
    Hit(
        "Brewing guide", "https://coffee.example/guide", "Grind fresh, pour at 94 C.", "2026-03-01"
    ),
    Hit("Bean origins", "https://beans.example/", "Where coffee grows."),
]
KEYS = {"TAVILY_API_KEY": "tvly-test", "BRAVE_API_KEY": "brave-test"}

Backend = tuple[Callable[[list[Hit]], FakeSearch], str]
BACKENDS: dict[str, Backend] = {
    "searxng": (lambda hits: FakeSearXNG(hits), ""),
    "tavily": (lambda hits: FakeTavily(hits, api_key=KEYS["TAVILY_API_KEY"]), "TAVILY_API_KEY"),
    "brave": (lambda hits: FakeBrave(hits, api_key=KEYS["BRAVE_API_KEY"]), "BRAVE_API_KEY"),
}


def tool_for(provider: str, fake: FakeSearch, environ: dict[str, str] | None = None) -> Tool:
    config = WebSearchConfig(provider=provider, url=fake.base_url)  # type: ignore[arg-type]
    return web_search_tool(config, KEYS if environ is None else environ)


async def search(tmp_path: Path, tool: Tool, **arguments: object) -> ToolResult:
    result = await tool.run(tool_context(tmp_path), {"query": "coffee brewing", **arguments})
    assert isinstance(result, ToolResult)
    return result


@pytest.mark.parametrize("provider", list(BACKENDS))
async def test_results_carry_title_url_snippet_and_date(tmp_path: Path, provider: str) -> None:
    make, _ = BACKENDS[provider]
    async with make(HITS) as fake:
        result = await search(tmp_path, tool_for(provider, fake), max_results=2)
    assert result.error_code is None
    assert "1. Brewing guide (2026-03-01)\n   https://coffee.example/guide\n   Grind fresh" in (
        result.output
    )
    assert "2. Bean origins\n   https://beans.example/\n   Where coffee grows." in result.output
    [request] = fake.requests
    if provider == "tavily":
        assert request.json == {
            "query": "coffee brewing",
            "max_results": 2,
            "search_depth": "basic",
        }
    else:
        assert request.query["q"] == "coffee brewing"
    if provider == "searxng":
        assert request.query["format"] == "json"


async def test_results_are_cut_to_max_results(tmp_path: Path) -> None:
    async with FakeSearXNG(HITS * 5) as fake:  # SearXNG has no count parameter
        result = await search(tmp_path, tool_for("searxng", fake), max_results=3)
    assert "3. " in result.output and "4. " not in result.output


@pytest.mark.parametrize("provider", list(BACKENDS))
async def test_rate_limit_is_a_clear_error(tmp_path: Path, provider: str) -> None:
    make, _ = BACKENDS[provider]
    async with make(HITS) as fake:
        fake.fail_next("rate", **({"Retry-After": "7"} if provider == "tavily" else {}))
        with pytest.raises(ToolError) as limited:
            await search(tmp_path, tool_for(provider, fake))
        again = await search(tmp_path, tool_for(provider, fake))
    assert limited.value.code == "rate_limited"
    assert f"{provider} search is rate limited" in str(limited.value)
    if provider == "tavily":
        assert "retry after 7 s" in str(limited.value) and "excessive requests" in str(
            limited.value
        )
    if provider == "brave":  # Brave says when its per-second window resets
        assert "retry after 1 s" in str(limited.value)
    assert "Brewing guide" in again.output


@pytest.mark.parametrize("provider", ["tavily", "brave"])
async def test_a_refused_key_is_reported(tmp_path: Path, provider: str) -> None:
    make, variable = BACKENDS[provider]
    async with make(HITS) as fake:
        with pytest.raises(ToolError) as refused:
            await search(tmp_path, tool_for(provider, fake, {variable: "wrong"}))
    assert refused.value.code == "search_unauthorized"
    assert "wrong" not in str(refused.value)


def test_a_missing_key_is_a_config_error() -> None:
    with pytest.raises(ValueError, match="BRAVE_API_KEY"):
        web_search_tool(WebSearchConfig(provider="brave"), {})


async def test_searxng_without_the_json_format(tmp_path: Path) -> None:
    async with FakeSearXNG(HITS, json_enabled=False) as fake:
        with pytest.raises(ToolError) as refused:
            await search(tmp_path, tool_for("searxng", fake))
    assert refused.value.code == "search_unauthorized"
    assert "search.formats" in str(refused.value)


async def test_tavily_plan_limit_is_a_search_failure(tmp_path: Path) -> None:
    async with FakeTavily(HITS, api_key=KEYS["TAVILY_API_KEY"]) as fake:
        fake.fail_next("plan")
        with pytest.raises(ToolError) as failed:
            await search(tmp_path, tool_for("tavily", fake))
    assert failed.value.code == "search_failed"
    assert "432" in str(failed.value) and "usage limit" in str(failed.value)


async def test_no_results(tmp_path: Path) -> None:
    async with FakeBrave([], api_key=KEYS["BRAVE_API_KEY"]) as fake:
        result = await search(tmp_path, tool_for("brave", fake))
    assert result.output == "No results for 'coffee brewing'."


async def test_arguments_are_bounded_by_the_schema() -> None:
    tool = web_search_tool(WebSearchConfig(provider="searxng", url="http://127.0.0.1:9"), {})
    assert tool.read_only
    properties = tool.input_schema["properties"]
    assert tool.input_schema["required"] == ["query"]
    bounded = next(item for item in properties["max_results"]["anyOf"] if "maximum" in item)
    assert (bounded["minimum"], bounded["maximum"]) == (1, 20)
