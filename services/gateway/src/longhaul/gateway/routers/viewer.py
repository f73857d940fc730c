"""The run viewer: one static page and its script, served from the package (no build step).

Only these fixed files are served — no path parameter, so nothing can be traversed.
"""

from __future__ import annotations

from importlib.resources import files

from fastapi import APIRouter
from fastapi.responses import HTMLResponse, Response

router = APIRouter(include_in_schema=False)

_STATIC = files("longhaul.gateway") / "static"
_PAGE = (_STATIC / "index.html").read_bytes()
_SCRIPT = (_STATIC / "viewer.js").read_bytes()
_HEADERS = {
    "Cache-Control": "no-cache",
    "Content-Security-Policy": (
        "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
        "connect-src 'self'; img-src 'self' data:; frame-ancestors 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
}


@router.get("/")
async def viewer() -> HTMLResponse:
    return HTMLResponse(_PAGE, headers=_HEADERS)


@router.get("/viewer.js")
async def viewer_script() -> Response:
    return Response(_SCRIPT, media_type="text/javascript", headers=_HEADERS)
