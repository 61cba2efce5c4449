"""What the launcher answers on its control channel (``topo stop``, ``topo snapshot``,
``topo apply``, ``topo restart``, the dashboard's actions).

Requests and answers are JSON objects (``topo.runs.control``): nothing is unpickled. A
change (``apply``) carries the new program as the IR's JSON; it is answered with the
plan at once and carried out in the background (``changes/<generation>.json`` follows it).
"""

from __future__ import annotations

from typing import Any, Protocol

from topo.ir import IRFormatError, Program, program_from_dict
from topo.snapshots.store import Snapshot, SnapshotError
from topo.supervisor.change_plan import LivePlan


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

    def apply(
        self,
        program: Program,
        *,
        dry_run: bool = ...,
        max_unavailable: int = ...,
        source: dict[str, Any] | None = ...,
        keep_state: bool = ...,
    ) -> tuple[LivePlan, int | None]: ...
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
    if op == "apply":
        return _apply(launcher, request)
    if op == "restart":
        node = request.get("node")
        if not isinstance(node, str) or not node:
            return {"ok": False, "error": "restart needs the node to restart"}
        return launcher.restart_node(node, str(request.get("by") or "topo restart"))
    return {"ok": False, "error": f"unknown request {op!r}"}


def _apply(launcher: Operated, request: dict[str, Any]) -> dict[str, Any]:
    from topo.ir.diff_printer import diff_to_dict, format_diff

    try:
        program = program_from_dict(request["program"])
    except (KeyError, TypeError, ValueError, IRFormatError) as exc:
        return {"ok": False, "error": f"the request has no program this topo can read: {exc}"}
    source = {k: request.get(k) for k in ("file", "topology", "params_given", "params")}
    plan, generation = launcher.apply(
        program,
        dry_run=bool(request.get("dry_run")),
        max_unavailable=int(request.get("max_unavailable") or 1),
        source=source,
        keep_state=not request.get("fresh"),
    )
    return {
        "ok": not plan.refused,
        "generation": generation,
        "equal": plan.empty,
        "refused": list(plan.refused),
        "plan": diff_to_dict(plan.diff),
        "plan_text": format_diff(plan.diff),
        "start": list(plan.start),
        "restart": list(plan.restart),
        "stop": list(plan.stop),
    }
