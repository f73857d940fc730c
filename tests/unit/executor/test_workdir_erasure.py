"""An erasure request names a key's directory by owner and scope; one that tries to name
anything else (a path, a dot name) is refused and removes nothing, as an attacker with the
gateway's NATS credential would try it."""

from __future__ import annotations

from pathlib import Path

import pytest
from longhaul.agent.workdir import WorkingDirError
from longhaul.domain.erasure import WorkdirErasure
from longhaul.executor.erasure import WorkdirEraser


def files(root: Path) -> list[str]:
    return sorted(p.relative_to(root).as_posix() for p in root.rglob("f*"))


@pytest.fixture
def root(tmp_path: Path) -> Path:
    for path in ("keys/k_a/t_1/f.txt", "keys/k_a/t_2/f.txt", "keys/k_b/t_3/f.txt", "other/f"):
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text("x")
    return tmp_path


async def test_one_scope_or_a_whole_key_is_removed(root: Path) -> None:
    eraser = WorkdirEraser(root)
    assert await eraser.remove(WorkdirErasure(owner="k_a", scope="t_1"))
    assert not (root / "keys/k_a/t_1").exists() and (root / "keys/k_a/t_2").exists()
    assert not await eraser.remove(WorkdirErasure(owner="k_a", scope="t_1"))  # gone already
    assert await eraser.remove(WorkdirErasure(owner="k_a"))
    assert not (root / "keys/k_a").exists() and (root / "keys/k_b/t_3/f.txt").exists()


@pytest.mark.parametrize(
    ("owner", "scope"),
    [("..", None), ("k_a", ".."), ("k_a/../../other", None), ("k_b", "t_3/../../k_a"), ("", None)],
)
async def test_a_request_naming_another_directory_is_refused(
    root: Path, owner: str, scope: str | None
) -> None:
    with pytest.raises(WorkingDirError):
        await WorkdirEraser(root).remove(WorkdirErasure(owner=owner, scope=scope))
    assert files(root) == [
        "keys/k_a/t_1/f.txt",
        "keys/k_a/t_2/f.txt",
        "keys/k_b/t_3/f.txt",
        "other/f",
    ]
