"""What the launcher answers on its control channel (``topo stop``, ``topo snapshot``,
``topo restart``, the dashboard's actions).

Requests and answers are JSON objects (``topo.runs.control``): nothing is unpickled.
"""

from __future__ import annotations

from typing import Any, Protocol

from topo.snapshots.store import Snapshot, SnapshotError


class Operated(Protocol):
    """What the control channel reaches of a launcher."""

    @property
    def phase(self) -> str: ...

    grace_s: float

    def request_stop(
        self, reason: str = ..., code: int = ..., grace_s: float | None = ...
    ) -> None: ...

    def kill(self) -> None: ...

    def snapshot(self, reason: str = ...) -> Snapshot: ...

    def restart_node(self, node: str, by: str = ...) -> dict[str, Any]: ...


def answer(launcher: Operated, request: dict[str, Any]) -> dict[str, Any]:
    """The launcher's answer to one request from another shell."""
    op = request.get("op")
    if op == "ping":
        return {"ok": True, "state": launcher.phase}
    if op == "stop":
        grace = request.get("grace")
        by = request.get("by") or "topo stop"
        launcher.request_stop(by, 0, None if grace is None else float(grace))
        if request.get("kill"):
            launcher.kill()
        return {"ok": True, "state": launcher.phase, "grace_s": launcher.grace_s}
    if op == "snapshot":
        try:
            taken = launcher.snapshot(str(request.get("by") or "topo snapshot"))
        except SnapshotError as exc:
            return {"ok": False, "error": str(exc)}
        return {
            "ok": True,
            "number": taken.number,
            "path": str(taken.path),
            "pause_s": taken.pause_s,
            "bytes": taken.size,
            "nodes": sorted(taken.nodes),
        }
    if op == "restart":
        node = request.get("node")
        if not isinstance(node, str) or not node:
            return {"ok": False, "error": "restart needs the node to restart"}
        return launcher.restart_node(node, str(request.get("by") or "topo restart"))
    return {"ok": False, "error": f"unknown request {op!r}"}
