"""Bundles without a server: the v1 fixture upgrades, re-identification leaves no old id
anywhere and makes the importer the owner, and contradictory bundles are refused."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import msgspec
import pytest
from longhaul.domain import events as ev
from longhaul.domain.bundle import VERSION, BundleError, reidentify, upgrade

V1 = Path(__file__).parents[2] / "integration" / "gateway" / "fixtures" / "bundle_v1.json"


def v1() -> dict[str, Any]:
    return dict(json.loads(V1.read_text()))


def test_a_version_1_bundle_is_upgraded_to_the_current_shape() -> None:
    bundle = upgrade(V1.read_bytes())
    assert bundle.version == VERSION and bundle.traces[0].trace_id == bundle.root
    [output] = bundle.files
    assert output.kind == "outputs" and output.data == b"an output"


def test_reidentified_events_name_no_old_id_and_belong_to_the_importer() -> None:
    bundle = upgrade(V1.read_bytes())
    old_events = {e["id"] for e in bundle.traces[0].events}
    fresh = reidentify(bundle, "k_importer")
    [(new_id, events)] = fresh.traces
    text = b"".join(ev.encode(e) for e in events).decode()
    assert bundle.root not in text and not any(old in text for old in old_events)
    created = events[0]
    assert isinstance(created, ev.TraceCreated) and created.owner == "k_importer"
    assert {e.aggregate_id for e in events} == {new_id} == {fresh.ids[bundle.root]}
    assert fresh.files[0].key == f"outputs/{new_id}/call_1"
    assert reidentify(bundle, "k_importer").root != new_id  # never the same ids twice


@pytest.mark.parametrize(
    ("change", "complaint"),
    [
        ({"format": "zip"}, "not a longhaul trace bundle"),
        ({"version": 0}, "version"),
        ({"root": "t_01OTHER0000000000000000000"}, "root"),
        ({"outputs": {"uploads/t_01OTHER0000000000000000000/x": "eA=="}}, "belongs to no trace"),
        ({"outputs": {"secrets/x": "eA=="}}, "unknown kind"),
    ],
)
def test_contradictory_bundles_are_refused(change: dict[str, Any], complaint: str) -> None:
    with pytest.raises(BundleError, match=complaint):
        upgrade(json.dumps({**v1(), **change}).encode())


def test_an_image_must_be_named_by_its_content() -> None:
    bundle = msgspec.json.decode(msgspec.json.encode(upgrade(V1.read_bytes())))
    data = b"data:image/png;base64,AAAA"
    named = hashlib.sha256(data).hexdigest()
    for key, ok in ((named, True), ("0" * 64, False)):
        image = {
            "kind": "images",
            "key": key,
            "data": msgspec.json.decode(msgspec.json.encode(data)),
        }
        raw = json.dumps({**bundle, "files": [image]}).encode()
        if ok:
            assert upgrade(raw).files[0].data == data
        else:
            with pytest.raises(BundleError, match="sha256"):
                upgrade(raw)


def test_an_event_of_another_trace_is_refused() -> None:
    data = v1()
    [events] = data["traces"].values()
    events[1]["aggregate_id"] = "t_01OTHER0000000000000000000"
    with pytest.raises(BundleError, match="not one of its own"):
        reidentify(upgrade(json.dumps(data).encode()), "k_importer")
