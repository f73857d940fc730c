"""A real MCP server for tests, written with the SDK's server API (``MCPServer``).

    python -m tests.support.mcp_server stdio
    python -m tests.support.mcp_server http [--port N] [--token T]   # prints its port

Tools: ``echo`` (text), ``add`` (structured result), ``pid`` (the serving process, so a test
can kill it), ``fail`` (an ``isError`` result), ``wait`` (sleeps: a call to time out or to be
cut by a kill), ``pixel`` (a 1x1 PNG image), ``boot`` (an id drawn when the process started,
so a test can tell a restarted server) and a naive file server: ``write_file``, ``read_file``
and ``list_dir`` take any path, relative to the cwd or absolute, ``..`` included, and check
nothing (the attacker's server: only the sandbox around it keeps a key to its own files).
Over HTTP, ``--token`` makes every request without ``Authorization: Bearer <token>`` a 401.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import os
import socket
import uuid
from pathlib import Path
from typing import Any

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ImageContent, TextContent

PIXEL_PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
)

server = MCPServer("longhaul-test")
BOOT = uuid.uuid4().hex


@server.tool(description="Echo the text back.")
def echo(text: str) -> str:
    return f"echo: {text}"


@server.tool(description="The idempotency key the call carried in its _meta.")
def key(ctx: Context) -> str:
    meta = ctx.request_context.meta or {}
    return str(meta.get("io.longhaul/idempotency-key", "none"))


@server.tool(description="Add two integers.")
def add(a: int, b: int) -> dict[str, int]:
    return {"sum": a + b}


@server.tool(description="The process id of this server.")
def pid() -> str:
    return str(os.getpid())


@server.tool(description="Always fails.")
def fail(reason: str = "on purpose") -> str:
    raise ToolError(reason)


@server.tool(description="Wait some seconds, then answer.")
async def wait(seconds: float) -> str:
    await asyncio.sleep(seconds)
    return f"waited {seconds}"


@server.tool(description="A 1x1 PNG image.", structured_output=False)
def pixel() -> list[Any]:
    return [
        TextContent(type="text", text="one red pixel"),
        ImageContent(
            type="image", data=base64.b64encode(PIXEL_PNG).decode(), mime_type="image/png"
        ),
    ]


@server.tool(description="An id drawn when this process started.")
def boot() -> str:
    return BOOT


@server.tool(description="Write a file (any path).")
def write_file(path: str, content: str) -> str:
    Path(path).write_text(content)
    return f"wrote {path}"


@server.tool(description="Read a file (any path).")
def read_file(path: str) -> str:
    return Path(path).read_text()


@server.tool(description="The names in a directory (any path).")
def list_dir(path: str = ".") -> str:
    return "\n".join(sorted(entry.name for entry in Path(path).iterdir()))


def _serve_http(port: int, token: str | None) -> None:
    import uvicorn
    from starlette.middleware.base import BaseHTTPMiddleware
    from starlette.requests import Request
    from starlette.responses import JSONResponse, Response

    app = server.streamable_http_app(host="127.0.0.1")

    async def check_token(request: Request, call_next: Any) -> Response:
        if token and request.headers.get("authorization") != f"Bearer {token}":
            return JSONResponse({"error": "unauthorized"}, status_code=401)
        response: Response = await call_next(request)
        return response

    app.add_middleware(BaseHTTPMiddleware, dispatch=check_token)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    print(sock.getsockname()[1], flush=True)  # the test reads the port from this line
    config = uvicorn.Config(app, log_level="warning")
    asyncio.run(uvicorn.Server(config).serve(sockets=[sock]))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("transport", choices=["stdio", "http"])
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--token")
    args = parser.parse_args()
    if args.transport == "stdio":
        server.run("stdio")
    else:
        _serve_http(args.port, args.token)


if __name__ == "__main__":
    main()
