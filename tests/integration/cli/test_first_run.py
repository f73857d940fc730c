"""The README's first run, its commands as printed: ``longhaul init`` in an empty folder with
a README, ``longhaul up`` started the way ``init`` says (its config, its tool module), and
``longhaul run --file README.md …``, whose agent reads the file on its first step."""

from __future__ import annotations

import asyncio
import re
import shlex
from pathlib import Path

import httpx

from tests.integration.cli.harness import LONGHAUL, cli_env, longhaul, running_up

README = Path(__file__).resolve().parents[3] / "README.md"
BLOCK = re.compile(r"<!-- first-run.*?-->\s*```sh\n(.*?)```\s*<!-- /first-run -->", re.S)
USERS_README = "# Word counter\nIt counts the words of a file, one line per file.\n"


def first_run_commands() -> list[list[str]]:
    """The section's command lines, split as a shell would (comments dropped)."""
    match = BLOCK.search(README.read_text())
    assert match, "README.md has no first-run block"
    return [shlex.split(line, comments=True) for line in match.group(1).splitlines()]


def split_env(words: list[str]) -> tuple[dict[str, str], list[str]]:
    """Leading NAME=value words (the shell's per-command environment) and the command."""
    env: dict[str, str] = {}
    while words and re.fullmatch(r"[A-Z_][A-Z0-9_]*=.*", words[0]):
        name, _, value = words.pop(0).partition("=")
        env[name] = value
    return env, words


async def test_the_readme_first_run_works_as_printed(tmp_path: Path) -> None:
    init, up, run = first_run_commands()
    assert init == ["longhaul", "init"]
    (tmp_path / "README.md").write_text(USERS_README)

    process = await asyncio.create_subprocess_exec(
        LONGHAUL,
        *init[1:],
        cwd=tmp_path,
        env=cli_env(),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    stdout, stderr = await asyncio.wait_for(process.communicate(), 60)
    told = stdout.decode()
    assert process.returncode == 0, told + stderr.decode()
    written = await asyncio.to_thread(lambda: {p.name for p in tmp_path.iterdir()})
    assert {"longhaul.yaml", "my_tools.py"} <= written
    # init says what to do next: the README's very next commands
    for command in (up, run):
        assert shlex.join(command) in told.replace('"', "'"), (command, told)

    up_env, up_command = split_env(up)
    assert up_command == ["longhaul", "up"]
    # free ports instead of 8080 (the harness adds them); the data dir is up's default
    async with running_up(tmp_path / ".longhaul", cli_env(**up_env), cwd=tmp_path) as url:
        assert run[:2] == ["longhaul", "run"]
        result = await longhaul(*run[1:], url=url, cwd=tmp_path, deadline_s=120)
        assert result.code == 0, result.output
        async with httpx.AsyncClient(base_url=url, timeout=30) as http:
            tools = (await http.get("/api/tools")).json()["tools"]
            trace = re.search(r"trace (t_\w+) · model", result.stdout)
            assert trace, result.stdout
            messages = (await http.get(f"/api/traces/{trace[1]}/messages")).json()
    assert "model scripted:demo" in result.stdout  # init's longhaul.yaml was read
    assert "file_stats" in {tool["name"] for tool in tools}  # and its tool module loaded
    # the model's first step saw the file: it was delivered before the first model call
    roles = [m["role"] for m in messages["messages"]]
    told_files = roles.index("user", 1)
    assert "README.md" in str(messages["messages"][told_files]["content"])
    assert roles.index("assistant") > told_files
    reads = [str(m["content"]) for m in messages["messages"] if m["role"] == "tool"]
    assert any("counts the words of a file" in text for text in reads), reads
    # in the trace's own directory, where the README says each trace works
    [copy] = (tmp_path / ".longhaul" / "work" / "keys").glob(f"*/{trace[1]}/README.md")
    assert copy.read_text() == USERS_README
