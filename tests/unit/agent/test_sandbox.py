"""The bash tool's sandbox, tried as a hostile tenant would: what it can read, write, link,
reach and use up. Real bubblewrap; these tests skip (saying why) where it cannot run."""

from __future__ import annotations

import asyncio
import logging
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest
from longhaul.agent.errors import ToolError
from longhaul.agent.tools import ToolResult, ToolSettings
from longhaul.agent.tools.sandbox import Sandbox
from longhaul.agent.tools.shell import bash
from longhaul.domain.config import SandboxConfig

from tests.unit.agent.support import tool_context

REPO = Path(__file__).parents[3]
_probe = Sandbox(SandboxConfig(mode="auto"))
needs_bwrap = pytest.mark.skipif(
    not _probe.confined, reason=f"no bubblewrap sandbox here: {_probe.problem}"
)


class Host:
    """A trace's working directory among things a tool must never reach."""

    def __init__(self, root: Path) -> None:
        self.workdir = root / "keys" / "k_a" / "t_mine"
        self.other = root / "keys" / "k_b" / "t_theirs"
        self.data = root / "data"
        for path in (self.workdir, self.other, self.data):
            path.mkdir(parents=True)
        (self.other / "secret.txt").write_text("OTHER-TENANT-SECRET")
        (self.data / "nats-credentials.json").write_text("DATA-DIR-SECRET")


@pytest.fixture
def host(tmp_path: Path) -> Host:
    return Host(tmp_path)


async def run(workdir: Path, command: str, timeout_s: float = 30, **sandbox: object) -> ToolResult:
    settings = ToolSettings(sandbox=SandboxConfig(**sandbox))  # type: ignore[arg-type]
    result = await bash.run(
        tool_context(workdir, settings=settings), {"command": command, "timeout_s": timeout_s}
    )
    assert isinstance(result, ToolResult)
    return result


@needs_bwrap
async def test_cannot_read_system_secrets_data_dir_other_tenants_or_service_home(
    host: Host,
) -> None:
    home = Path.home()
    targets = [
        "/etc/shadow",
        "/etc/passwd",
        str(host.data / "nats-credentials.json"),
        str(host.other / "secret.txt"),
        "../../k_b/t_theirs/secret.txt",
        str(REPO / "pyproject.toml"),
        str(home),
    ]
    for target in targets:
        result = await run(host.workdir, f"cat {target} || ls {target}")
        assert "SECRET" not in result.output and "[project]" not in result.output, target
        assert result.error_code == "nonzero_exit", (target, result.output)
    listing = await run(host.workdir, "ls / /etc")
    assert set(listing.output.split("\n\n")[0].split()) <= {
        "/:", "bin", "dev", "etc", "lib", "lib32", "lib64", "libx32", "proc", "sbin", "tmp",
        "usr", "var",
    }  # fmt: skip


@needs_bwrap
async def test_cannot_write_outside_the_working_directory(host: Host, tmp_path: Path) -> None:
    command = (
        "echo x > ../escape; echo x > /usr/escape; echo x > "
        f"{host.other}/planted; echo x > {tmp_path}/escape; echo x > /tmp/scratch; "
        "echo ok > mine.txt"
    )
    result = await run(host.workdir, command)
    assert (host.workdir / "mine.txt").read_text() == "ok\n"
    assert not (host.workdir.parent / "escape").exists()
    assert not (host.other / "planted").exists() and not (tmp_path / "escape").exists()
    assert "/usr/escape" not in os.listdir("/usr")
    assert "Read-only file system" in result.output or "No such file" in result.output


@needs_bwrap
async def test_links_out_of_the_working_directory_cannot_be_made_or_followed(
    host: Host,
) -> None:
    outside = host.other / "secret.txt"
    result = await run(
        host.workdir,
        f"ln -s {outside} sym; cat sym; ln {outside} hard; ln /usr/bin/bash hard2; "
        "ln -s /etc etc; cat etc/shadow; ls",
    )
    assert "SECRET" not in result.output
    assert not (host.workdir / "hard").exists()
    assert not (host.workdir / "hard2").exists(), "a hard link to a system file was made"
    assert "Invalid cross-device link" in result.output or "No such file" in result.output


@needs_bwrap
async def test_no_network_unless_the_config_allows_it(host: Host) -> None:
    server = await asyncio.start_server(lambda r, w: w.close(), "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    probe = (
        "python3 -c \"import socket; socket.create_connection(('127.0.0.1', "
        f"{port}), timeout=5); print('CONNECTED')\""
    )
    try:
        closed = await run(host.workdir, probe)
        assert "CONNECTED" not in closed.output and closed.error_code == "nonzero_exit"
        assert "Connection refused" in closed.output
        opened = await run(host.workdir, probe, network=True)
        assert "CONNECTED" in opened.output, opened.output
    finally:
        server.close()
        await server.wait_closed()


@needs_bwrap
async def test_no_service_secret_is_visible_anywhere_in_the_sandbox(
    host: Host, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LONGHAUL_API_KEYS", "canary-api-key")
    monkeypatch.setenv("OPENAI_API_KEY", "canary-provider-key")
    result = await run(
        host.workdir,
        "env; cat /proc/*/environ | tr '\\0' '\\n'; ls /proc | grep -c '^[0-9]'",
    )
    assert "canary" not in result.output
    assert "LONGHAUL_" not in result.output


@needs_bwrap
async def test_memory_hog_is_stopped_by_the_memory_limit(host: Host) -> None:
    hog = "python3 -c \"b = bytearray(512 * 1024 * 1024); print('ALLOCATED')\""
    result = await run(host.workdir, hog, memory_mb=256)
    assert "MemoryError" in result.output and "ALLOCATED" not in result.output


@needs_bwrap
async def test_cpu_burner_is_killed_by_the_cpu_limit(host: Host) -> None:
    result = await run(host.workdir, "while :; do :; done", timeout_s=60, cpu_s=1)
    # SIGXCPU at the soft limit: 128 + 24.
    assert result.output.endswith("[exit code 152]"), result.output


_FORKER = """
import os, sys, time
from pathlib import Path
from longhaul.agent.tools.sandbox import Sandbox
from longhaul.domain.config import SandboxConfig

bomb = '''
import os, time
n = 0
for _ in range(400):
    try:
        pid = os.fork()
    except OSError:
        break
    if pid == 0:
        time.sleep(60)
        os._exit(0)
    n += 1
print("forked", n, flush=True)
'''
sandbox = Sandbox(SandboxConfig(max_processes=int(sys.argv[2])))
workdir = Path(sys.argv[1])
argv = sandbox.command(["python3", "-c", bomb], working_dir=workdir, env={"PATH": "/usr/bin"})
import subprocess
import tempfile
out = subprocess.run(argv, preexec_fn=sandbox.preexec, capture_output=True, text=True, timeout=60)
print(out.stdout, out.stderr)
"""


def _as_nobody() -> None:
    os.setgroups([])
    os.setgid(65534)
    os.setuid(65534)


@needs_bwrap
def test_fork_bomb_is_bounded_for_an_unprivileged_service_user() -> None:
    """The kernel exempts root from the process limit: the executor runs as a service user
    (the image's `longhaul`), so this runs the sandbox as one (uid 65534) with the system
    python. Every process the user has counts, hence the margin."""
    system_python = shutil.which("python3", path="/usr/bin")
    if os.getuid() != 0 or system_python is None:
        pytest.skip("needs root (to become an unprivileged user) and /usr/bin/python3")
    site = next((REPO / ".venv" / "lib").glob("python3*/site-packages"))
    paths = [*(REPO / "libs").glob("*/src"), site]
    workdir = Path(tempfile.mkdtemp(prefix="longhaul-nobody-"))  # pytest's tmp is root-only
    workdir.chmod(0o777)
    try:
        done = _run_as_nobody(system_python, workdir, paths)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    if "cannot create namespaces" in done.stdout + done.stderr or "uid map" in (
        done.stdout + done.stderr
    ):
        pytest.skip(f"unprivileged user namespaces are not allowed here: {done.stderr}")
    words = done.stdout.split()
    assert "forked" in words, done.stdout + done.stderr
    forked = int(words[words.index("forked") + 1])
    assert forked < 64


def _run_as_nobody(
    system_python: str, workdir: Path, paths: list[Path]
) -> subprocess.CompletedProcess[str]:
    # The child reaches the sources through directories opened here, as root: a checkout in a
    # home directory of mode 700 is out of that user's reach by path.
    fds = [os.open(path, os.O_RDONLY | os.O_DIRECTORY) for path in paths]
    try:
        return subprocess.run(
            [system_python, "-c", _FORKER, str(workdir), "64"],
            env={
                "PYTHONPATH": os.pathsep.join(f"/proc/self/fd/{fd}" for fd in fds),
                "PATH": "/usr/bin",
            },
            preexec_fn=_as_nobody,
            pass_fds=fds,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
    finally:
        for fd in fds:
            os.close(fd)


async def test_bash_is_refused_when_no_sandbox_is_available(
    host: Host, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bin_dir = tmp_path / "bin-without-bwrap"
    bin_dir.mkdir()
    (bin_dir / "bash").symlink_to(shutil.which("bash") or "/bin/bash")
    monkeypatch.setenv("PATH", str(bin_dir))
    with pytest.raises(ToolError) as refused:
        await run(host.workdir, "echo ran > ran.txt")
    assert refused.value.code == "sandbox_unavailable"
    assert "bubblewrap" in str(refused.value) and "sandbox.mode: none" in str(refused.value)
    assert not (host.workdir / "ran.txt").exists()
    # The operator's explicit opt-out runs it unconfined.
    result = await run(host.workdir, "echo ran > ran.txt", mode="none")
    assert result.error_code is None and (host.workdir / "ran.txt").exists()


def test_executor_says_at_start_up_that_bash_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    from longhaul.agent.tools import ToolRegistry
    from longhaul.core.config import LonghaulConfig
    from longhaul.executor.agent_turns import AgentTurns

    monkeypatch.setenv("PATH", str(tmp_path))
    with caplog.at_level(logging.INFO, logger="longhaul.executor.agent_turns"):
        AgentTurns(LonghaulConfig(), ToolRegistry(), workspace=None, working_root=tmp_path)
    (line,) = [r.getMessage() for r in caplog.records if r.getMessage().startswith("bash:")]
    assert "no sandbox" in line and "refused" in line and "sandbox.mode: none" in line
    assert line.startswith("bash: degraded")
    assert [r.levelno for r in caplog.records if r.getMessage() == line] == [logging.WARNING]


needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="the executor is not root here")
CORE_PATTERN = "/proc/sys/kernel/core_pattern"


def host_core_pattern() -> str:
    with open(CORE_PATTERN) as file:
        return file.read()


@needs_bwrap
@needs_root
async def test_root_executor_tool_cannot_write_proc_sys(host: Host) -> None:
    """Host root inside the sandbox could point core_pattern at a program run as root. The
    host's own value is written back, so even a failed defence changes nothing."""
    before = host_core_pattern()
    value = before.rstrip("\n")
    result = await run(host.workdir, f"id -u; printf '%s' '{value}' > {CORE_PATTERN}")
    assert result.error_code == "nonzero_exit", result.output
    assert result.output.splitlines()[0] == "65534"
    assert "Read-only file system" in result.output or "Permission denied" in result.output
    assert host_core_pattern() == before


@needs_bwrap
@needs_root
async def test_root_executor_tool_runs_as_nobody_and_its_files_stay_usable(host: Host) -> None:
    (host.workdir / "given.txt").write_text("from the files tool\n")
    result = await run(host.workdir, "id -u; echo more >> given.txt; mkdir out; echo x > out/new")
    assert result.error_code is None, result.output
    assert result.output.splitlines()[0] == "65534"
    assert (host.workdir / "given.txt").read_text() == "from the files tool\nmore\n"
    (host.workdir / "out" / "new").write_text("root still writes here")


@needs_bwrap
async def test_tmp_cannot_be_filled_beyond_its_size(host: Host) -> None:
    fill = "head -c 20M /dev/zero > /tmp/fill; s=$?; du -m /tmp/fill; exit $s"
    result = await run(host.workdir, fill, tmp_mb=8)
    assert result.error_code == "nonzero_exit", result.output
    assert "No space left on device" in result.output
    size = next(line for line in result.output.splitlines() if line.endswith("/tmp/fill"))
    assert int(size.split()[0]) <= 8


@needs_bwrap
async def test_no_nested_user_namespace(host: Host) -> None:
    result = await run(host.workdir, "unshare -U -r id -u")
    assert result.error_code == "nonzero_exit", result.output
    assert "unshare failed" in result.output


@needs_bwrap
async def test_a_working_directory_over_its_quota_refuses_the_next_command(host: Host) -> None:
    first = await run(host.workdir, "head -c 3M /dev/urandom > fill.bin", workdir_mb=2)
    assert first.error_code is None, first.output  # under the quota when it started
    with pytest.raises(ToolError) as refused:
        await run(host.workdir, "echo should not run > ran.txt", workdir_mb=2)
    assert refused.value.code == "workdir_full"
    assert "sandbox.workdir_mb (2 MB)" in str(refused.value)
    assert not (host.workdir / "ran.txt").exists()
    (host.workdir / "fill.bin").unlink()
    assert (await run(host.workdir, "echo ok", workdir_mb=2)).error_code is None


@needs_bwrap
@needs_root
async def test_a_root_executor_s_sandbox_is_bounded_in_processes(host: Host) -> None:
    """Root is exempt from RLIMIT_NPROC; the sandbox's uid is not."""
    bomb = (
        'python3 -c "import os,time\nn=0\nfor _ in range(300):\n try:\n  p=os.fork()\n'
        " except OSError:\n  break\n if p==0:\n  time.sleep(30); os._exit(0)\n n+=1\n"
        "print('forked', n)\""
    )
    result = await run(host.workdir, bomb, max_processes=40)
    words = result.output.split()
    assert "forked" in words, result.output
    assert int(words[words.index("forked") + 1]) < 40


@needs_bwrap
@needs_root
async def test_handing_the_directory_over_never_follows_a_tools_links(host: Host) -> None:
    """A tool leaves links to a root-owned file and directory; the next run's hand-over to the
    sandbox user must not chown what they point at."""
    target = host.data / "nats-credentials.json"
    plant = f"ln -s {target} file-link; ln -s {host.data} dir-link; mkdir d; ln -s {host.data} d/x"
    assert (await run(host.workdir, plant)).error_code is None
    assert (await run(host.workdir, "true")).error_code is None
    assert target.stat().st_uid == 0 and host.data.stat().st_uid == 0
    assert (host.workdir / "file-link").lstat().st_uid == 65534
