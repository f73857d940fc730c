"""The lists the docs give in full — the gateway's routes and error codes, the CLI's commands,
the JetStream buckets — are the code's: a route, code, command or bucket added or removed
without its line in the docs (or a line left for one that is gone) fails here. The lists live
in the numbered pages of docs/ (a table is found by its section heading, or anywhere in the
README and the pages, so a section moved between pages keeps its test)."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import typer.main
from longhaul.cli.main import app as cli_app
from longhaul.core.config import LonghaulConfig
from longhaul.gateway.app import create_app
from longhaul.gateway.errors import STATUS_CODES, TRANSITION_STATUS
from starlette.routing import Route

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
README = ROOT / "README.md"
GATEWAY_SRC = ROOT / "services" / "gateway" / "src"
NAMES = ROOT / "libs" / "domain" / "src" / "longhaul" / "domain" / "names.py"

_METHOD_LINE = re.compile(r"^(GET|POST|PUT|PATCH|DELETE|WS)\s+(/\S*)")
_TASKS_ALIAS = "/api/v1/tasks"


def _all_docs() -> str:
    """The README and every page of docs/, as one text."""
    pages = sorted(DOCS.glob("*.md"))
    return "\n".join(path.read_text(encoding="utf-8") for path in [README, *pages])


def _section(heading: str) -> str:
    """The text under a `## heading` (wherever the pages put it), up to the next `## `."""
    text = _all_docs()
    start = text.index(f"\n## {heading}\n") + 1
    end = text.find("\n## ", start + 1)
    return text[start : end if end != -1 else len(text)]


def _normalise(path: str) -> str:
    """Parameter names and converters differ between prose and code (`{id}` for
    `{trace_id}`, `{experience_id:experience_id}`): only the shape counts."""
    return re.sub(r"\{[^}]*\}", "{}", path)


_FASTAPI_PAGES = {"/openapi.json", "/docs", "/docs/oauth2-redirect", "/redoc"}


def _code_routes() -> set[tuple[str, str]]:
    app = create_app(LonghaulConfig())
    routes: set[tuple[str, str]] = set()
    for included in app.router.routes:
        contexts = getattr(included, "effective_route_contexts", None)
        if contexts is None:
            # FastAPI's own /openapi.json and /docs pages are not listed; a plain route (an
            # ASGI app such as /mcp) is
            if isinstance(included, Route) and included.path not in _FASTAPI_PAGES:
                routes |= {(m, included.path) for m in included.methods or () if m != "HEAD"}
            continue
        for context in contexts():
            path = context.path or context.original_route.path
            if path.startswith(_TASKS_ALIAS):  # documented once, as an alias of /api/tasks
                continue
            for method in sorted(context.methods or {"WS"}):
                routes.add((method, _normalise(path)))
    return routes


def _route_block() -> str:
    section = _section("Gateway HTTP API")
    start = section.index("```\n") + 4
    return section[start : section.index("```\n", start)]


def _documented_routes() -> set[tuple[str, str]]:
    routes: set[tuple[str, str]] = set()
    for line in _route_block().splitlines():
        match = _METHOD_LINE.match(line)
        assert match, f"a line of the route list that names no route: {line!r}"
        routes.add((match.group(1), _normalise(match.group(2))))
    return routes


def test_the_route_list_in_the_docs_is_the_gateways() -> None:
    code, docs = _code_routes(), _documented_routes()
    assert not code - docs, f"routes the gateway serves that the docs do not list: {code - docs}"
    assert not docs - code, f"routes the docs list that the gateway does not serve: {docs - code}"


def _commands(command: Any, prefix: tuple[str, ...]) -> Iterator[tuple[str, ...]]:
    """Typer ships its own copy of click, so groups are told by their ``list_commands``."""
    if hasattr(command, "list_commands"):
        context = type(command).context_class(command)
        for name in command.list_commands(context):
            sub = command.get_command(context, name)
            assert sub is not None
            yield from _commands(sub, (*prefix, name))
    else:
        yield prefix


def _cli_commands() -> set[str]:
    root = typer.main.get_command(cli_app)
    return {" ".join(("longhaul", *path)) for path in _commands(root, ())}


def _documented_commands() -> set[str]:
    text = _all_docs()
    rows = re.findall(r"^\| `(longhaul [^`]*)` \|", text, flags=re.MULTILINE)
    # the table names the command, then its arguments in capitals and its options
    return {
        " ".join(word for word in row.split() if re.fullmatch(r"[a-z][a-z-]*", word))
        for row in rows
    }


def test_the_command_table_in_the_docs_is_the_clis() -> None:
    code, docs = _cli_commands(), _documented_commands()
    assert not code - docs, f"commands the docs' table lacks: {code - docs}"
    assert not docs - code, f"commands the docs list that do not exist: {docs - code}"


def _string_argument(call: ast.Call, position: int, keyword: str) -> str | None:
    argument = call.args[position] if len(call.args) > position else None
    if isinstance(argument, ast.Constant):
        return argument.value if isinstance(argument.value, str) else None
    for item in call.keywords:
        if item.arg == keyword and isinstance(item.value, ast.Constant):
            return str(item.value.value)
    return None


def _code_error_codes() -> set[str]:
    """Every code literal the gateway's source answers with: `ApiError(status, code, …)`,
    `error_response` / `shaped_error(status, code, …)`, a helper's `code="…"` default, and the
    two tables that map statuses and fold refusals onto codes."""
    codes = set(STATUS_CODES.values()) | set(TRANSITION_STATUS)
    for file in GATEWAY_SRC.rglob("*.py"):
        for node in ast.walk(ast.parse(file.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call):
                name = getattr(node.func, "id", getattr(node.func, "attr", None))
                if name in {"ApiError", "error_response", "shaped_error"}:
                    code = _string_argument(node, 1, "code")
                    if code is not None:
                        codes.add(code)
            elif isinstance(node, ast.arguments):
                named = node.posonlyargs + node.args + node.kwonlyargs
                defaults = [None] * (len(node.posonlyargs + node.args) - len(node.defaults))
                for arg, default in zip(
                    named, [*defaults, *node.defaults, *node.kw_defaults], strict=True
                ):
                    if arg.arg == "code" and isinstance(default, ast.Constant):
                        codes.add(str(default.value))
    return codes


def _documented_error_codes() -> set[str]:
    text = _all_docs()
    rows = re.findall(r"^\| [1-5]\d\d \| (.+?) \|", text, flags=re.MULTILINE)
    return {code for row in rows for code in re.findall(r"`([a-z_]+)`", row)}


def test_the_error_code_table_in_the_docs_is_the_gateways() -> None:
    code, docs = _code_error_codes(), _documented_error_codes()
    assert not code - docs, f"error codes the gateway answers that the table lacks: {code - docs}"
    assert not docs - code, (
        f"error codes the table lists that the gateway never answers: {docs - code}"
    )


def test_every_bucket_is_in_the_jetstream_layout() -> None:
    buckets = set(re.findall(r'_bucket\("([a-z_]+)"\)', NAMES.read_text(encoding="utf-8")))
    assert buckets, "names.py declares no bucket: this test reads it wrongly"
    layout = _section("JetStream layout")
    documented = set(re.findall(r"^\| `(lh_[a-z_]+)` \|", layout, flags=re.MULTILINE))
    assert buckets == documented


def _security_rows() -> list[str]:
    section = _section("Security: each defence and the test that proves it")
    return [line for line in section.splitlines() if line.startswith("| ") and "`tests/" in line]


def test_every_test_the_security_table_names_exists() -> None:
    """`path::name`, then `::other` for another test of the same file."""
    rows = _security_rows()
    assert rows, "the security table names no test: this test reads it wrongly"
    missing = []
    for row in rows:
        path: Path | None = None
        for reference in re.findall(r"`((?:tests/\S+?\.py)?::\w+)`", row):
            file, _, name = reference.partition("::")
            path = ROOT / file if file else path
            assert path is not None, f"{reference!r} names no file before it: {row}"
            if not re.search(rf"^(async )?def {name}\(", path.read_text(), flags=re.MULTILINE):
                missing.append(f"{path.relative_to(ROOT)}::{name}")
    assert not missing, f"tests the security table names that do not exist: {missing}"
