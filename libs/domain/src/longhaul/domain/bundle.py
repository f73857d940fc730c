"""A trace family as one self-contained, versioned file: export, upgrade, re-identify.

A bundle holds the log of a trace and of its local sub-traces (every event as it was
stored) and the values the log refers to: stored tool outputs, uploads, attachments and the
images its messages show. Importing never writes into anything that exists: every trace id
and event id is replaced by a fresh one, consistently wherever it appears (the envelope,
parent and child links, goal ids that embed a trace id, workspace keys named in message text),
the owner of every trace becomes the importer, and the root is cut from any parent or task
it had where it came from.

Versions: ``1`` kept each trace's events in a map by id and the values as ``outputs`` (key to
base64); ``2`` (current) lists traces root first and names each file with its kind. An older
bundle is upgraded (:func:`upgrade`) before anything else reads it.
"""

from __future__ import annotations

import binascii
import hashlib
import re
from typing import Any, Literal

import msgspec
from longhaul.domain import events as ev
from longhaul.domain.ids import new_id, ulid

FORMAT = "longhaul.trace-bundle"
VERSION = 2
FileKind = Literal["outputs", "uploads", "trace", "images", "context"]
FILE_KINDS: tuple[FileKind, ...] = ("outputs", "uploads", "trace", "images", "context")
"""Workspace prefixes a trace owns (``<kind>/<trace id>/…``) and two kinds named in the bundle
by their sha256: images (kept under the importer's key) and recorded contexts (system prompt
and tool schemas, stored under each trace whose log names them, ``context/<trace>/<sha256>``)."""
BY_CONTENT = ("images", "context")
_TRACE_ID = re.compile(r"^t_[0-9A-Za-z]{10,40}$")
_SHA256 = re.compile(r"^[0-9a-f]{64}$")
_KEY_PART = re.compile(r"^[\w=-]+$")
"""A segment of a workspace key (``longhaul.core.workspace``): no dots, so no ``..``."""


class BundleError(ValueError):
    """The bundle cannot be imported: not a bundle, a version this longhaul does not know,
    or contents that contradict themselves."""


class BundleTrace(msgspec.Struct, kw_only=True):
    trace_id: str
    events: list[Any]
    """The stored events (JSON objects; ``msgspec.Raw`` when exporting), in log order."""


class BundleFile(msgspec.Struct, kw_only=True):
    kind: FileKind
    key: str
    """The workspace key (``outputs/<trace id>/<call>``; an image: its sha256)."""
    data: bytes
    """Base64 in the JSON."""


class Bundle(msgspec.Struct, kw_only=True):
    format: str = FORMAT
    version: int = VERSION
    exported_at: float = 0.0
    root: str
    traces: list[BundleTrace]
    """Parents before children; the first is the root."""
    files: list[BundleFile] = msgspec.field(default_factory=list)


def _upgrade_v1(data: dict[str, Any]) -> dict[str, Any]:
    """v1: ``traces`` a map id → events, ``outputs`` a map key → base64 (no images)."""
    traces = data.get("traces")
    outputs = data.get("outputs", {})
    if not isinstance(traces, dict) or not isinstance(outputs, dict):
        raise BundleError("a version 1 bundle has maps of traces and outputs")
    root = data.get("root")
    if root not in traces:
        raise BundleError("the bundle's root is not among its traces")
    ordered = [root, *(t for t in traces if t != root)]
    files = []
    for key, encoded in outputs.items():
        kind = str(key).split("/", 1)[0]
        if kind not in FILE_KINDS:
            raise BundleError(f"a version 1 output has an unknown kind: {key!r}")
        files.append({"kind": kind, "key": key, "data": encoded})
    return {
        "format": FORMAT,
        "version": 2,
        "exported_at": data.get("exported_at", 0.0),
        "root": root,
        "traces": [{"trace_id": t, "events": traces.get(t, [])} for t in ordered],
        "files": files,
    }


UPGRADES = {1: _upgrade_v1}
"""``version → the next version's shape``: each hook lifts a bundle one version."""


def upgrade(raw: bytes) -> Bundle:
    """Parse a bundle of any known version into the current one (``BundleError`` otherwise)."""
    try:
        data = msgspec.json.decode(raw)
    except (msgspec.DecodeError, RecursionError) as exc:  # RecursionError: nested too deep
        raise BundleError(f"not JSON: {exc}") from exc
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise BundleError(f"not a longhaul trace bundle (format is not {FORMAT!r})")
    version = data.get("version")
    if not isinstance(version, int) or not 1 <= version <= VERSION:
        raise BundleError(
            f"bundle version {version!r} is not one this longhaul reads (1..{VERSION})"
        )
    while version < VERSION:
        data = UPGRADES[version](data)
        version = data["version"]
    try:
        bundle = msgspec.convert(data, Bundle)
    except (msgspec.ValidationError, binascii.Error) as exc:
        raise BundleError(f"malformed bundle: {exc}") from exc
    _check_shape(bundle)
    return bundle


def _check_shape(bundle: Bundle) -> None:
    ids = [t.trace_id for t in bundle.traces]
    if not ids or ids[0] != bundle.root:
        raise BundleError("the bundle's first trace must be its root")
    if len(set(ids)) != len(ids) or not all(_TRACE_ID.match(i) for i in ids):
        raise BundleError("trace ids must be distinct and look like t_…")
    owned = {(kind, i) for kind in FILE_KINDS if kind not in BY_CONTENT for i in ids}
    for file in bundle.files:
        if file.kind in BY_CONTENT:
            # stored by content: the name must be the content's digest
            if not _SHA256.match(file.key) or hashlib.sha256(file.data).hexdigest() != file.key:
                raise BundleError(f"{file.kind} {file.key[:80]!r} is not named by its sha256")
        elif tuple(file.key.split("/")[:2]) not in owned or file.kind != file.key.split("/")[0]:
            raise BundleError(f"file {file.key[:80]!r} belongs to no trace of the bundle")
        elif not all(_KEY_PART.match(part) for part in file.key.split("/")):
            raise BundleError(f"file {file.key[:80]!r} is not a workspace key (a-z, 0-9, _=-)")


class Reidentified(msgspec.Struct, kw_only=True):
    """A bundle's traces under fresh ids, ready to append."""

    root: str
    traces: list[tuple[str, list[ev.Event]]]
    files: list[BundleFile]
    ids: dict[str, str]
    """Old trace id → new."""


def reidentify(bundle: Bundle, owner: str | None) -> Reidentified:
    """Fresh ids everywhere, ``owner`` on every trace, the root cut loose. Every event must
    decode and belong to its trace; the first of each trace must be its creation.

    A trace the events name that is not in the bundle (a child, parent or root, as a whole
    field) gets a fresh id too, one that names nothing: a crafted bundle could otherwise make
    another key's trace a child of the import, which export, delete, stop and
    ``workspace_read`` follow. Remote links (``remote_subtrace_linked``) are left out: every
    key's remote children live on the remote under this longhaul's one key, so a link the
    importer did not make would let it read, continue or message someone else's; an imported
    remote child shows as not linked."""
    ids = {t.trace_id: new_id("t") for t in bundle.traces}
    event_ids: dict[str, str] = {}
    outside: dict[str, str] = {}
    decoded: list[tuple[str, list[ev.Event]]] = []
    for trace in bundle.traces:
        events = [_decoded(raw, trace.trace_id) for raw in trace.events]
        events = [e for e in events if not isinstance(e, ev.RemoteSubtraceLinked)]
        if not events or not isinstance(events[0], ev.TraceCreated):
            raise BundleError(f"trace {trace.trace_id} does not begin with its creation")
        event_ids.update({e.id: ulid() for e in events})
        for event in events:
            named = _named_traces(msgspec.to_builtins(event))
            outside.update({t: new_id("t") for t in named if t not in ids and t not in outside})
        decoded.append((trace.trace_id, events))
    mapping = {**outside, **ids, **event_ids}
    pattern = re.compile("|".join(map(re.escape, sorted(mapping, key=len, reverse=True))))
    out = []
    for old, events in decoded:
        fresh = [_rewritten(e, pattern, mapping) for e in events]
        created = fresh[0]
        assert isinstance(created, ev.TraceCreated)
        # what names the exporter's task, schedule or trigger is not the importer's
        cut: dict[str, Any] = {"task_id": None, "phase_id": None}
        cut |= {"schedule_id": None, "trigger_id": None}
        if old == bundle.root:
            cut |= {"parent_trace_id": None, "parent_goal_id": None, "parent_tool_call_id": None}
            cut |= {"root_trace_id": None, "depth": 0}
        fresh[0] = msgspec.structs.replace(created, owner=owner, eval=None, **cut)
        out.append((ids[old], fresh))
    files = [
        BundleFile(kind=f.kind, key=pattern.sub(lambda m: mapping[m[0]], f.key), data=f.data)
        for f in bundle.files
    ]
    return Reidentified(root=ids[bundle.root], traces=out, files=files, ids=ids)


def _named_traces(value: Any) -> set[str]:
    """Every string of an event (as builtins) that is a whole trace id."""
    if isinstance(value, str):
        return {value} if _TRACE_ID.match(value) else set()
    if isinstance(value, dict):
        value = list(value.values())
    if isinstance(value, list):
        return set().union(*map(_named_traces, value)) if value else set()
    return set()


def _decoded(raw: Any, trace_id: str) -> ev.Event:
    try:
        event = ev.decode(msgspec.json.encode(raw))
    except ev.EventDecodeError as exc:
        raise BundleError(f"an event of {trace_id} does not decode: {exc}") from exc
    if not isinstance(event, ev.TraceEvent) or event.aggregate_id != trace_id:
        raise BundleError(f"an event filed under {trace_id} is not one of its own")
    return event


def _rewritten(event: ev.Event, pattern: re.Pattern[str], mapping: dict[str, str]) -> ev.Event:
    text = ev.encode(msgspec.structs.replace(event, trace_context=None)).decode()
    return ev.decode(pattern.sub(lambda m: mapping[m[0]], text))
