"""The deployment's seccomp profile (deploy/seccomp/longhaul-sandbox.json) leaves the sandbox
working: a process confined by it, as the executor's container is, runs the real ``bash``
tool under bubblewrap, still confined, while a syscall the profile forbids fails. The profile is
applied through the system's libseccomp in a child process (a filter cannot be taken off)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from longhaul.agent.tools.sandbox import Sandbox
from longhaul.domain.config import SandboxConfig

from tests.support.seccomp import libseccomp

REPO = Path(__file__).parents[3]
PROFILE = REPO / "deploy" / "seccomp" / "longhaul-sandbox.json"
_probe = Sandbox(SandboxConfig())
pytestmark = [
    pytest.mark.skipif(not _probe.confined, reason=f"no bubblewrap sandbox: {_probe.problem}"),
    pytest.mark.skipif(libseccomp() is None, reason="libseccomp.so.2 is not installed"),
]

# In the child: the profile (unless "none"), then syslog(SIZE_BUFFER) — a read-only syscall
# the profile forbids — and the bash tool. Prints what both gave.
CHILD = """
import asyncio, ctypes, json, sys
from pathlib import Path
from longhaul.agent.tools import ToolSettings
from longhaul.agent.tools.shell import bash
from tests.support.seccomp import apply_profile
from tests.unit.agent.support import tool_context

profile, workdir = sys.argv[1], Path(sys.argv[2])
if profile != "none":
    apply_profile(Path(profile))
libc = ctypes.CDLL(None, use_errno=True)
klog = libc.klogctl(10, None, 0)
command = "echo inside > made.txt; cat made.txt; ls /; unshare -U true || echo nested-refused"
result = asyncio.run(bash.run(tool_context(workdir, settings=ToolSettings()), {"command": command}))
print(json.dumps({"klog": klog, "errno": ctypes.get_errno(), "output": result.output}))
"""


def run_child(profile: str, workdir: Path) -> dict[str, object]:
    done = subprocess.run(
        [sys.executable, "-c", CHILD, profile, str(workdir)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    seen: dict[str, object] = json.loads(done.stdout.splitlines()[-1])
    return seen


def test_sandboxed_bash_works_under_the_deployment_profile_and_the_profile_holds(
    tmp_path: Path,
) -> None:
    unfiltered = run_child("none", tmp_path / "a")
    if unfiltered["klog"] == -1:
        pytest.skip("syslog is refused here even without the profile (not root)")
    filtered = run_child(str(PROFILE), tmp_path / "b")
    assert filtered["klog"] == -1 and filtered["errno"] == 1, filtered  # EPERM: forbidden
    output = str(filtered["output"])
    assert output.startswith("inside\n"), output
    assert "[exit code 0]" in output, output
    assert "home" not in output.split() and "root" not in output.split(), output  # confined
    assert "nested-refused" in output, output
    assert (tmp_path / "b" / "made.txt").read_text() == "inside\n"
