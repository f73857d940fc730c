"""Files for a trace's next turn (``longhaul.domain.state.uploads``)."""

from __future__ import annotations

import pytest
from longhaul.domain import events as ev
from longhaul.domain.state.errors import InvalidTransition
from longhaul.domain.state.uploads import MAX_PENDING_UPLOADS, Uploads


def uploaded(name: str, size: int = 1) -> ev.FileUploaded:
    return ev.FileUploaded(name=name, size=size, sha256="0" * 64, key=f"files/{name}")


def test_the_latest_upload_of_a_name_wins_and_delivery_removes_it() -> None:
    uploads = Uploads()
    uploads.add(uploaded("a", 1))
    uploads.add(uploaded("b"))
    uploads.add(uploaded("a", 2))
    assert [(u.name, u.size) for u in uploads.pending] == [("b", 1), ("a", 2)]
    uploads.delivered(["a", "unknown"])
    assert [u.name for u in uploads.pending] == ["b"]


def test_a_full_tray_refuses_another_file() -> None:
    uploads = Uploads(pending=[uploaded(f"f{i}") for i in range(MAX_PENDING_UPLOADS - 1)])
    uploads.check("t_1")
    uploads.add(uploaded("last"))
    with pytest.raises(InvalidTransition, match="trace t_1 already has 50 files") as full:
        uploads.check("t_1")
    assert full.value.code == "conflict"
