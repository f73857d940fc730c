"""A tool's child dies with its parent, and only then: a service that is pid 1 itself (the
only process of its container) still starts children (issue 42: every `bash` in the image
ended with exit code 137 before it ran)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

PROBE = """
import os, subprocess
from longhaul.agent.tools.childproc import limit_child
done = subprocess.run(["sh", "-c", "echo ran"], preexec_fn=lambda: limit_child([]),
                      capture_output=True, text=True)
print(os.getpid(), done.returncode, done.stdout.strip())
"""


@pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("unshare") is None,
    reason="needs root and unshare(1) to run a service as pid 1 of a PID namespace",
)
def test_a_service_that_is_pid_1_starts_children() -> None:
    done = subprocess.run(
        ["unshare", "--pid", "--fork", sys.executable, "-c", PROBE],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.stdout.split() == ["1", "0", "ran"], done.stdout + done.stderr


def test_a_child_whose_parent_is_alive_runs() -> None:
    done = subprocess.run(
        [sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.stdout.split()[1:] == ["0", "ran"], done.stdout + done.stderr
