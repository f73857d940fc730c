"""Uniform JSON errors: every 4xx/5xx body is ``{"error": {"code", "message", "details"}}``.

Clients (the CLI, the viewer, scripts) branch on ``code``, so FastAPI's own validation errors,
Starlette's unknown-route 404s and our domain refusals all share one shape.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from longhaul.domain.state import InvalidTransition
from pydantic import BaseModel, Field
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Match

log = logging.getLogger(__name__)

STATUS_CODES: dict[int, str] = {
    400: "bad_request",
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    409: "conflict",
    413: "body_too_large",
    415: "unsupported_media_type",
    422: "invalid_request",
    429: "rate_limited",
    503: "unavailable",
    507: "insufficient_storage",
}

# How a fold's refusal maps onto HTTP: a missing aggregate is 404, a request that does not fit
# the current status is 409, a request that names something that does not exist inside the
# aggregate (a message sequence, a goal) is 422.
TRANSITION_STATUS: dict[str, int] = {
    "not_found": 404,
    "conflict": 409,
    "messaging_off": 409,
    "duplicate_message": 409,
    "unknown_sequence": 422,
}


class ErrorDetail(BaseModel):
    code: str = Field(description="stable machine-readable reason")
    message: str = Field(description="human-readable explanation")
    details: Any = Field(default=None, description="structured context (validation errors…)")


class ErrorBody(BaseModel):
    error: ErrorDetail


class ApiError(Exception):
    """A refusal with its HTTP status; rendered by :func:`install_error_handlers`."""

    def __init__(
        self,
        status: int,
        code: str,
        message: str,
        details: Any = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.details = details
        self.headers = headers

    @classmethod
    def insufficient_storage(cls, message: str) -> ApiError:
        """507: the event stream or object store is full (``longhaul.gateway.storage``)."""
        return cls(507, "insufficient_storage", message, headers={"Retry-After": "30"})

    @classmethod
    def from_transition(cls, exc: InvalidTransition) -> ApiError:
        return cls(TRANSITION_STATUS.get(exc.code, 422), exc.code, str(exc))


def not_found(kind: str, identifier: str) -> ApiError:
    return ApiError(404, "not_found", f"{kind} {identifier} not found")


def error_response(
    status: int,
    code: str,
    message: str,
    details: Any = None,
    headers: dict[str, str] | None = None,
) -> JSONResponse:
    body = {"error": {"code": code, "message": message, "details": details}}
    return JSONResponse(body, status_code=status, headers=headers)


ErrorShape = Callable[[int, str, str, Any, "dict[str, str] | None"], JSONResponse]
"""Renders a refusal in a protocol's own error shape: (status, code, message, details,
headers) → response."""


def shaped_error(
    status: int,
    code: str,
    message: str,
    details: Any = None,
    headers: dict[str, str] | None = None,
    *,
    request: Request,
) -> JSONResponse:
    """The refusal in the shape of the surface the request came to (``/v1``: OpenAI's error
    object), else the gateway's own."""
    app_state = getattr(request.scope.get("app"), "state", None)
    shapes: dict[str, ErrorShape] = getattr(app_state, "error_shapes", {})
    for prefix, shape in shapes.items():
        if request.scope.get("path", "").startswith(prefix):
            return shape(status, code, message, details, headers)
    return error_response(status, code, message, details, headers)


def _validation_details(exc: RequestValidationError) -> list[dict[str, Any]]:
    """Pydantic's errors without ``input``/``ctx``: they may hold bytes or exception objects
    (not JSON) and would echo a client's possibly large payload back at it."""
    return [
        {"loc": list(err.get("loc", ())), "msg": str(err.get("msg", "")), "type": err.get("type")}
        for err in exc.errors()
    ]


async def _api_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, ApiError)
    return shaped_error(
        exc.status, exc.code, exc.message, exc.details, exc.headers, request=request
    )


async def _validation_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    details = _validation_details(exc)
    if any(item["type"] == "json_invalid" for item in details):
        return shaped_error(
            400, "malformed_json", "request body is not valid JSON", details, request=request
        )
    return shaped_error(
        422, "invalid_request", "request does not match the schema", details, request=request
    )


_METHODS = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS")


def _allowed_methods(request: Request) -> str:
    """Every method some route serves at this path, found by asking the routes whether they
    would fully match the path with each method. Starlette's own ``Allow`` names only the first
    route that matched the path (wrong when GET and POST are separate routes), and FastAPI's
    included routers carry no ``methods`` of their own, so reading attributes finds nothing."""
    allowed = [
        method
        for method in _METHODS
        if any(
            route.matches({**request.scope, "method": method})[0] == Match.FULL
            for route in request.app.routes
        )
    ]
    return ", ".join(allowed)


async def _http_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, StarletteHTTPException)
    code = STATUS_CODES.get(exc.status_code, "error")
    headers = dict(exc.headers or {})
    if exc.status_code == 404:
        message = f"no route {request.method} {request.url.path}"
    elif exc.status_code == 405:
        headers["Allow"] = _allowed_methods(request)
        message = f"{request.method} is not allowed here; allowed: {headers['Allow'] or 'none'}"
    else:
        message = str(exc.detail)
    return shaped_error(exc.status_code, code, message, None, headers or None, request=request)


async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
    log.error("unhandled error on %s %s", request.method, request.url.path, exc_info=exc)
    return shaped_error(500, "internal", "internal error; see the gateway log", request=request)


def install_error_handlers(app: FastAPI, shapes: dict[str, ErrorShape] | None = None) -> None:
    """``shapes``: path prefix → the error shape of the protocol served under it."""
    app.state.error_shapes = shapes or {}
    app.add_exception_handler(ApiError, _api_error)
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(StarletteHTTPException, _http_error)
    app.add_exception_handler(Exception, _unexpected)


ERROR_RESPONSES: dict[int | str, dict[str, Any]] = {
    status: {
        "description": code.replace("_", " "),
        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorBody"}}},
    }
    for status, code in STATUS_CODES.items()
    if status in (400, 401, 403, 404, 409, 413, 422, 429, 503)
}
"""Documented on every API route so the OpenAPI document lists the error shape, as JSON
whatever the route's own answer is. A reference rather than ``"model": ErrorBody``: FastAPI
builds a validating field per response model, per route, in every new app (nine a route, 0.2 s
of CPU on an app's first requests), and the document only needs the schema, which
:func:`~longhaul.gateway.openapi.configured_openapi` adds once."""
