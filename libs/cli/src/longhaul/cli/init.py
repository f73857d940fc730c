"""``longhaul init``: a commented ``longhaul.yaml`` and a tool module to start from, and what
to run next. It never overwrites a file (``--force`` does)."""

from __future__ import annotations

from pathlib import Path

CONFIG_NAME = "longhaul.yaml"
TOOLS_NAME = "my_tools.py"

CONFIG = """\
# longhaul.yaml, written by `longhaul init`. Every key is optional; LONGHAUL_* variables
# override it (nested with __, e.g. LONGHAUL_MODELS__DEFAULT=openai:gpt-4o).
# Read it by starting with: LONGHAUL_CONFIG=longhaul.yaml longhaul up

models:
  # The model a run uses when it names none. scripted:demo runs offline (no key, no
  # download): it lists and reads the files it was given, writes a note and says what it did.
  default: scripted:demo
  # default: openai:gpt-4o-mini            # with OPENAI_API_KEY (OPENAI_BASE_URL: vLLM, Ollama)
  # default: anthropic:claude-sonnet-4-5   # with ANTHROPIC_API_KEY
  # default: local:smollm2                 # offline, on this CPU (the longhaul[local] extra)

gateway:
  # Who may call the gateway: none listed, anyone who reaches it (keep it on 127.0.0.1).
  # Each key's runs, files and schedules are its own; clients send it as --api-key,
  # LONGHAUL_API_KEY or Authorization: Bearer.
  # api_keys: ["{key}"]
  host: 127.0.0.1
  port: 8080

presets:
  # A preset is a kind of agent: longhaul run --preset reviewer "…"
  reviewer:
    extends: default
    description: reads and reports, changes nothing
    read_only: true          # only tools that change nothing outside the trace
    max_iterations: 20       # model calls per run

# Your own tools: {tools} beside this file is a tool module. Load it into the executors with
#   LONGHAUL_EXECUTOR__TOOL_MODULES=my_tools   (comma-separated module names)
# and grant a tool secrets from the executor's environment (the model never sees them):
# tools:
#   secrets:
#     file_stats: {{token: FILE_STATS_TOKEN}}
"""

TOOLS = '''\
"""Your own tools, written by `longhaul init`: load them with
LONGHAUL_EXECUTOR__TOOL_MODULES=my_tools. The signature is the schema the model sees, the
docstring's first paragraph the description and ``Args:`` the parameters."""

from longhaul.agent.errors import ToolError
from longhaul.agent.tools import ToolContext, tool


@tool(read_only=True)
def file_stats(ctx: ToolContext, path: str) -> str:
    """Count the lines and words of a file in the working directory.

    Args:
        path: the file, relative to the working directory.
    """
    file = (ctx.working_dir / path).resolve()
    if not file.is_relative_to(ctx.working_dir.resolve()) or not file.is_file():
        raise ToolError(f"no file {path} in the working directory", code="not_found")
    text = file.read_text(errors="replace")
    return f"{path}: {len(text.splitlines())} lines, {len(text.split())} words"


TOOLS = [file_stats]
'''


def next_steps(directory: Path) -> str:
    where = "" if directory.resolve() == Path.cwd().resolve() else f"cd {directory}\n  "
    return (
        "Next:\n"
        f"  {where}LONGHAUL_CONFIG={CONFIG_NAME} LONGHAUL_EXECUTOR__TOOL_MODULES=my_tools "
        "longhaul up\n"
        "and in another terminal, from the same folder:\n"
        '  longhaul run --file README.md "summarise the README in this folder"\n'
        "then open http://127.0.0.1:8080 to watch it in the viewer."
    )


def write_starter(directory: Path, key: str, *, force: bool) -> list[Path]:
    """Write the two files into ``directory``; an existing one is refused (FileExistsError)
    before anything is written, unless ``force``."""
    files = {
        directory / CONFIG_NAME: CONFIG.format(key=key, tools=TOOLS_NAME),
        directory / TOOLS_NAME: TOOLS,
    }
    existing = [path for path in files if path.exists()]
    if existing and not force:
        raise FileExistsError(", ".join(str(path) for path in existing))
    directory.mkdir(parents=True, exist_ok=True)
    for path, text in files.items():
        path.write_text(text)
    return list(files)
