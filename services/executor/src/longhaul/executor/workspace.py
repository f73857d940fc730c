"""The engine's :class:`longhaul.agent.workspace.Workspace` port over the shared ``lh_workspace``
KV (large values offloaded to the object store by ``longhaul.core.workspace``)."""

from __future__ import annotations

from longhaul.core.workspace import WorkspaceStore


class KvWorkspace:
    def __init__(self, workspace: WorkspaceStore) -> None:
        self._workspace = workspace

    async def get(self, key: str) -> bytes | None:
        entry = await self._workspace.get(key)
        return entry.value if entry is not None else None

    async def put(self, key: str, value: bytes) -> None:
        await self._workspace.put(key, value)
