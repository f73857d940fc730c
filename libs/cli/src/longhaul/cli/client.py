"""The CLI's HTTP client for the gateway: JSON calls with clear errors, and SSE streams that
reconnect with ``Last-Event-ID`` so a dropped connection loses nothing."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import httpx

DEFAULT_URL = "http://127.0.0.1:8080"
TIMEOUT_S = 10.0
STREAM_READ_TIMEOUT_S = 60.0
"""Streams carry a heartbeat every 15 s; a minute of silence means the connection is dead."""
RECONNECT_ATTEMPTS = 5


class GatewayError(Exception):
    """Something the user should read; ``exit_code`` 2 means the gateway was not reachable."""

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        code: str | None = None,
        exit_code: int = 1,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.exit_code = exit_code


@dataclass(frozen=True)
class StreamEvent:
    event: str
    data: dict[str, Any]
    id: int | None = None


class Gateway:
    def __init__(self, url: str = DEFAULT_URL, api_key: str | None = None) -> None:
        self.url = url.rstrip("/")
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._http = httpx.AsyncClient(
            base_url=self.url, headers=headers, timeout=httpx.Timeout(TIMEOUT_S)
        )

    async def __aenter__(self) -> Gateway:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self._http.aclose()

    def _unreachable(self, exc: Exception) -> GatewayError:
        return GatewayError(
            f"cannot reach the gateway at {self.url} ({type(exc).__name__}). Start it with "
            "`longhaul up` (or `make run`), or point --url / LONGHAUL_URL at a running one.",
            exit_code=2,
        )

    @staticmethod
    def _refusal(response: httpx.Response) -> GatewayError:
        try:
            error = response.json()["error"]
            code, message = str(error["code"]), str(error["message"])
        except (ValueError, KeyError, TypeError):
            code, message = "error", response.text[:200] or response.reason_phrase
        hint = ""
        if response.status_code == 401:
            hint = " (set LONGHAUL_API_KEY or --api-key)"
        return GatewayError(
            f"{response.status_code} {code}: {message}{hint}",
            status=response.status_code,
            code=code,
        )

    async def _send(self, method: str, path: str, **request: Any) -> httpx.Response:
        try:
            response = await self._http.request(method, path, **request)
        except (httpx.ConnectError, httpx.ConnectTimeout) as exc:
            raise self._unreachable(exc) from exc
        except httpx.TimeoutException as exc:
            raise GatewayError(f"the gateway at {self.url} did not answer in time") from exc
        if response.status_code >= 400:
            raise self._refusal(response)
        return response

    async def call(
        self, method: str, path: str, *, json_body: Any = None, params: dict[str, Any] | None = None
    ) -> Any:
        response = await self._send(method, path, json=json_body, params=params)
        return response.json()

    async def text(self, method: str, path: str, *, content: str | None = None) -> str:
        """A call whose body and answer are text (markdown), not JSON."""
        headers = {"Content-Type": "text/markdown"} if content is not None else None
        response = await self._send(method, path, content=content, headers=headers)
        return response.text

    async def get(self, path: str, **params: Any) -> Any:
        present = {key: value for key, value in params.items() if value is not None}
        return await self.call("GET", path, params=present)

    async def post(self, path: str, body: Any = None) -> Any:
        return await self.call("POST", path, json_body=body)

    async def events(
        self, path: str, *, after: int = 0, follow: bool = True
    ) -> AsyncIterator[StreamEvent]:
        """Stream ``path`` (an ``/events`` URL), resuming after drops from the last id seen."""
        last = after
        failures = 0
        while True:
            try:
                async for item in self._stream_once(path, last, follow):
                    failures = 0
                    if item.id is not None:
                        last = item.id
                    yield item
                return
            except (httpx.ConnectError, httpx.ConnectTimeout) as exc:
                failures += 1
                if failures >= RECONNECT_ATTEMPTS:
                    raise self._unreachable(exc) from exc
            except (httpx.ReadError, httpx.ReadTimeout, httpx.RemoteProtocolError) as exc:
                failures += 1
                if failures >= RECONNECT_ATTEMPTS:
                    raise GatewayError(f"lost the event stream: {exc}") from exc
            await asyncio.sleep(min(0.2 * 2**failures, 5.0))

    async def _stream_once(self, path: str, after: int, follow: bool) -> AsyncIterator[StreamEvent]:
        timeout = httpx.Timeout(TIMEOUT_S, read=STREAM_READ_TIMEOUT_S)
        params = {"follow": "true" if follow else "false"}
        headers = {"Last-Event-ID": str(after)}
        async with self._http.stream(
            "GET", path, params=params, headers=headers, timeout=timeout
        ) as response:
            if response.status_code >= 400:
                await response.aread()
                raise self._refusal(response)
            fields: dict[str, str] = {}
            async for line in response.aiter_lines():
                if line:
                    if not line.startswith(":"):
                        name, _, value = line.partition(":")
                        fields[name] = value.removeprefix(" ")
                    continue
                if "data" in fields:
                    event_id = fields.get("id")
                    yield StreamEvent(
                        fields.get("event", "message"),
                        json.loads(fields["data"]),
                        int(event_id) if event_id else None,
                    )
                fields = {}
