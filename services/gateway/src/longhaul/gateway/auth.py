"""Bearer API keys, hashed at rest and compared in constant time.

Keys come from ``gateway.api_keys`` / ``LONGHAUL_API_KEYS`` as plaintext or as
``sha256:<hex>`` (so a config file need not hold the secret). Only digests are kept in memory.
A key's *owner id* (``k_`` + the first 16 hex digits of its digest) is what ``TraceCreated.owner``
records, so traces survive key rotation only by keeping the key, never by name.

With no key configured the gateway is a local development server: it binds loopback only
(see ``main``), refuses non-loopback peers with 403, refuses requests whose ``Host`` is not a
loopback name with 403 (DNS rebinding: a web page whose name now resolves to 127.0.0.1 would
otherwise pass both the peer and the same-origin checks), and every request acts as one owner.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Literal
from urllib.parse import urlsplit

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from longhaul.gateway.errors import ApiError
from longhaul.gateway.ratelimit import RateLimiter, retry_after_header
from pydantic import SecretStr

if TYPE_CHECKING:
    from longhaul.gateway.runtime import Runtime

LOCAL_OWNER = "local"
_HASH_PREFIX = "sha256:"

bearer_scheme = HTTPBearer(auto_error=False, description="an API key from LONGHAUL_API_KEYS")


@dataclass(frozen=True)
class Principal:
    """Who is calling: the owner id every trace and task is filed under."""

    owner: str


def _digest(key: str) -> bytes:
    return hashlib.sha256(key.encode("utf-8")).digest()


def owner_id(digest: bytes) -> str:
    return "k_" + digest.hex()[:16]


class KeyRing:
    def __init__(self, keys: list[SecretStr]) -> None:
        digests: list[bytes] = []
        for secret in keys:
            value = secret.get_secret_value().strip()
            if value.startswith(_HASH_PREFIX):
                digests.append(bytes.fromhex(value[len(_HASH_PREFIX) :]))
            elif value:
                digests.append(_digest(value))
        self._digests = digests
        self.owners = frozenset(owner_id(digest) for digest in digests) or frozenset({LOCAL_OWNER})
        """The configured keys' owner ids (``local`` on a keyless gateway)."""

    @property
    def open(self) -> bool:
        """No key configured: local development mode."""
        return not self._digests

    def admits(self, owner: str) -> bool:
        """Whether ``owner`` is one of the configured keys (``local`` on a keyless gateway):
        a run or a schedule of any other owner was left by a key since removed."""
        return owner in self.owners

    def identify(self, token: str) -> Principal | None:
        """The owner of ``token``, or None. Every stored digest is compared (no early exit)
        so the time taken does not reveal which key, if any, matched."""
        presented = _digest(token)
        match: bytes | None = None
        for digest in self._digests:
            if hmac.compare_digest(presented, digest):
                match = digest
        return Principal(owner_id(match)) if match is not None else None


def is_loopback(host: str | None) -> bool:
    if not host:
        return False
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def host_name(host: str | None) -> str | None:
    """The name part of a ``Host`` header (``localhost:8080`` → ``localhost``, ``[::1]:80`` →
    ``::1``), or None when it does not parse."""
    if not host:
        return None
    try:
        return urlsplit(f"//{host}").hostname
    except ValueError:
        return None


def authenticate_token(
    keys: KeyRing, token: str | None, peer: str | None, host: str | None
) -> Principal:
    """The shared rule for HTTP and WebSocket requests (``host``: the ``Host`` header)."""
    if keys.open:
        if not is_loopback(peer):
            raise ApiError(
                403,
                "forbidden",
                "this gateway has no API keys and only serves loopback clients; "
                "set LONGHAUL_API_KEYS to serve others",
            )
        if not is_loopback(host_name(host)):
            raise ApiError(
                403,
                "forbidden",
                f"this gateway has no API keys and only answers to a loopback Host "
                f"(localhost, 127.0.0.1, [::1]), not {host!r}; "
                "set LONGHAUL_API_KEYS to serve other host names",
            )
        return Principal(LOCAL_OWNER)
    if not token:
        raise ApiError(
            401,
            "unauthorized",
            "missing API key: send Authorization: Bearer <key>",
            headers={"WWW-Authenticate": "Bearer"},
        )
    principal = keys.identify(token)
    if principal is None:
        raise ApiError(
            401, "unauthorized", "invalid API key", headers={"WWW-Authenticate": "Bearer"}
        )
    return principal


def _bearer(request: Request, credentials: HTTPAuthorizationCredentials | None) -> str | None:
    """The bearer token, or None; another ``Authorization`` scheme is a 401."""
    if credentials is None and request.headers.get("authorization"):
        raise ApiError(
            401,
            "unauthorized",
            "Authorization header must be 'Bearer <key>'",
            headers={"WWW-Authenticate": "Bearer"},
        )
    return credentials.credentials if credentials else None


def check_origin(origin: str | None, host: str | None, allowed: list[str]) -> None:
    """Refuse browser requests from other sites (403).

    Browsers always send ``Origin`` on cross-site POSTs and WebSocket handshakes, and a
    form-encoded POST needs no CORS preflight: without this a web page could steer a keyless
    local gateway (cross-site request forgery, WebSocket hijacking). Requests without
    ``Origin`` (curl, the CLI) and same-origin requests (the viewer) pass.
    """
    if origin is None or origin in allowed or "*" in allowed:
        return
    parsed = urlsplit(origin)
    if host is not None and parsed.netloc == host:
        return
    raise ApiError(403, "forbidden", f"origin {origin} is not allowed (gateway.cors_origins)")


def enforce_rate_limit(limiter: RateLimiter, principal: Principal) -> None:
    enforce_limit(limiter, principal.owner)


def enforce_limit(limiter: RateLimiter, key: str) -> None:
    """429 with ``Retry-After`` when ``key``'s bucket is empty."""
    wait = limiter.acquire(key)
    if wait > 0:
        raise ApiError(
            429,
            "rate_limited",
            f"too many requests; retry in {wait:.1f}s",
            details={"retry_after_s": round(wait, 3)},
            headers={"Retry-After": retry_after_header(wait)},
        )


BearerCredentials = Annotated[HTTPAuthorizationCredentials | None, Depends(bearer_scheme)]


async def current_principal(request: Request, credentials: BearerCredentials) -> Principal:
    """FastAPI dependency of every ``/api`` route: authenticate, then rate-limit per key."""
    runtime: Runtime = request.app.state.runtime
    token = _bearer(request, credentials)
    check_origin(
        request.headers.get("origin"),
        request.headers.get("host"),
        runtime.config.gateway.cors_origins,
    )
    peer = request.client.host if request.client else None
    principal = authenticate_token(runtime.keys, token, peer, request.headers.get("host"))
    enforce_rate_limit(runtime.limiter, principal)
    return principal


CurrentPrincipal = Annotated[Principal, Depends(current_principal)]


def _operator(request: Request, token: str | None, ring: KeyRing, setting: str) -> None:
    """Authenticate the operator of a route that covers every key: a keyless gateway's
    caller (loopback only), else only a bearer of ``setting``'s keys, never a tenant's."""
    runtime: Runtime = request.app.state.runtime
    peer = request.client.host if request.client else None
    host = request.headers.get("host")
    if runtime.keys.open:
        authenticate_token(runtime.keys, token, peer, host)
        return
    if ring.open:
        env = "LONGHAUL_" + setting.rsplit(".", 1)[-1].upper()
        raise ApiError(
            401,
            "unauthorized",
            f"this route covers every key and is the operator's: set {setting} ({env}) "
            "and send Authorization: Bearer <that key>",
            headers={"WWW-Authenticate": "Bearer"},
        )
    authenticate_token(ring, token, peer, host)


def operator(ring: Literal["metrics_keys", "admin_keys"]) -> Callable[..., Awaitable[None]]:
    """A FastAPI dependency admitting the bearers of ``gateway.<ring>`` only."""

    async def dependency(request: Request, credentials: BearerCredentials) -> None:
        runtime: Runtime = request.app.state.runtime
        _operator(request, _bearer(request, credentials), getattr(runtime, ring), f"gateway.{ring}")

    return dependency


metrics_reader = operator("metrics_keys")
"""``/metrics``, whose totals cover every key's traces: the operator's scraper."""
administrator = operator("admin_keys")
"""``/api/admin``: erasing a key's data."""
