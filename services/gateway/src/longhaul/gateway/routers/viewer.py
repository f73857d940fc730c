"""The run viewer: a static page, its ES modules and stylesheet, served from the package
(no build step).

Only the files listed in :data:`_ASSETS` are served: the name is looked up in that fixed
table, so nothing can be traversed.
"""

from __future__ import annotations

from importlib.resources import files

from fastapi import APIRouter
from fastapi.responses import HTMLResponse, Response
from longhaul.gateway.errors import ApiError

router = APIRouter(include_in_schema=False)

_STATIC = files("longhaul.gateway") / "static"
_PAGE = (_STATIC / "index.html").read_bytes()
_TYPES = {".js": "text/javascript", ".css": "text/css"}
_ASSETS: dict[str, tuple[bytes, str]] = {
    item.name: (item.read_bytes(), _TYPES[suffix])
    for item in (_STATIC / "ui").iterdir()
    for suffix in ("." + item.name.rpartition(".")[2],)
    if suffix in _TYPES
}
_HEADERS = {
    "Cache-Control": "no-cache",
    "Content-Security-Policy": (
        "default-src 'self'; script-src 'self'; style-src 'self'; "
        "connect-src 'self'; img-src 'self' data:; frame-ancestors 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
}


@router.get("/")
async def viewer() -> HTMLResponse:
    return HTMLResponse(_PAGE, headers=_HEADERS)


@router.get("/ui/{name}")
async def viewer_asset(name: str) -> Response:
    asset = _ASSETS.get(name)
    if asset is None:
        raise ApiError(404, "not_found", "no such viewer file")
    body, media_type = asset
    return Response(body, media_type=media_type, headers=_HEADERS)
