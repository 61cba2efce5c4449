"""What the launcher answers on its control channel (``topo stop``, ``topo snapshot``,
``topo apply``, ``topo restart``, the dashboard's actions).

Requests and answers are JSON objects (``topo.runs.control``): nothing is unpickled. A
change (``apply``) carries the new program as the IR's JSON; it is answered with the
plan at once and carried out in the background (``changes/<generation>.json`` follows it)
-- unless it would stop the program or lose work and is not ``confirmed`` (the answer's
``confirm`` says why). ``describe`` imports a new program's targets where the nodes
import them and describes them, so that ``topo apply`` checks the arguments without
importing a node's framework itself.
"""

from __future__ import annotations

import hashlib
from dataclasses import replace
from typing import Any, Protocol

from topo.backends.base import Backend
from topo.ir import IRFormatError, Program, program_from_dict
from topo.rundir.snapshots import Snapshot, SnapshotError
from topo.supervisor.change_plan import ChangeAsk, LivePlan
from topo.supervisor.reactions import Supervisor
from topo.supervisor.state import RunState


class Operated(Protocol):
    """What the control channel reaches of a launcher."""

    @property
    def phase(self) -> str: ...

    @property
    def state(self) -> RunState: ...

    @property
    def supervisor(self) -> Supervisor: ...

    def request_stop(
        self, reason: str = ..., code: int = ..., grace_s: float | None = ...
    ) -> None: ...

    def snapshot(self, reason: str = ...) -> Snapshot: ...

    def apply(self, program: Program, ask: ChangeAsk = ...) -> tuple[LivePlan, int | None]: ...

    def restart_node(self, node: str, by: str = ..., fresh: bool = ...) -> dict[str, Any]: ...

    def describe_targets(self, targets: list[str], source: str | None) -> dict[str, Any]: ...

    def node_stacks(self, names: list[str], everything: bool = False) -> dict[str, Any]: ...

    def debug(
        self, node: str, action: str, text: str, wait_s: float, again: bool = ...
    ) -> dict[str, Any]: ...

    @property
    def backend(self) -> Backend: ...


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
            launcher.supervisor.kill()
        return {"ok": True, "state": launcher.phase, "grace_s": launcher.state.grace_s}
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
    if op == "describe":
        targets, source = request.get("targets"), request.get("source")
        if not isinstance(targets, list) or not all(isinstance(t, str) for t in targets):
            return {"ok": False, "error": "describe needs the targets, a list of names"}
        where = source if isinstance(source, str) else None
        return {
            "ok": True,
            "targets": launcher.describe_targets(targets, where),
            "imports_here": launcher.backend.imports_here,
        }
    if op == "apply":
        return _apply(launcher, request)
    if op == "restart":
        node = request.get("node")
        if not isinstance(node, str) or not node:
            return {"ok": False, "error": "restart needs the node to restart"}
        by = str(request.get("by") or "topo restart")
        return launcher.restart_node(node, by, bool(request.get("fresh")))
    if op == "debug":
        node, action, text = request.get("node"), request.get("action"), request.get("text", "")
        wait_s = request.get("wait_s", 1.0)
        if not isinstance(node, str) or action not in ("read", "write"):
            return {"ok": False, "error": "debug needs a node and an action, read or write"}
        if not isinstance(text, str) or not isinstance(wait_s, int | float):
            return {"ok": False, "error": "debug: text is a string, wait_s a number"}
        wait_s = min(max(float(wait_s), 0.0), 30.0)
        return launcher.debug(node, action, text, wait_s, bool(request.get("again")))
    if op == "stacks":
        names = request.get("nodes") or []
        if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
            return {"ok": False, "error": "stacks needs the nodes, a list of names"}
        return launcher.node_stacks(names, bool(request.get("all")))
    return {"ok": False, "error": f"unknown request {op!r}"}


def plan_digest(plan_text: str) -> str:
    """What a confirmation names: the plan it was shown (``topo apply``'s y/N prompt)."""
    return hashlib.sha256(plan_text.encode()).hexdigest()[:16]


def _apply(launcher: Operated, request: dict[str, Any]) -> dict[str, Any]:
    from topo.ir.diff_printer import format_diff

    try:
        program = program_from_dict(request["program"])
    except (KeyError, TypeError, ValueError, IRFormatError) as exc:
        return {"ok": False, "error": f"the request has no program this topo can read: {exc}"}
    keys = ("file", "topology", "params_given", "params", "params_change")
    source = {k: request.get(k) for k in keys}
    ask = ChangeAsk(
        dry_run=bool(request.get("dry_run")),
        max_unavailable=int(request.get("max_unavailable") or 1),
        source=source,
        keep_state=not request.get("fresh"),
        confirmed=bool(request.get("confirmed")),
    )
    expect = request.get("expect")
    if expect is not None:  # confirmed at a prompt: only the plan that was shown
        shown, _ = launcher.apply(program, replace(ask, dry_run=True, confirmed=False))
        if plan_digest(format_diff(shown.diff)) != expect:
            why = "the run's program changed since the plan was shown: run topo apply again"
            shown = replace(shown, refused=(*shown.refused, why))
            return _answer(shown, None)
    plan, generation = launcher.apply(program, ask)
    return _answer(plan, generation)


def _answer(plan: LivePlan, generation: int | None) -> dict[str, Any]:
    from topo.ir.diff_printer import diff_to_dict, format_diff

    text = format_diff(plan.diff)
    return {
        "ok": not plan.refused,
        "generation": generation,
        "equal": plan.empty,
        "refused": list(plan.refused),
        "confirm": list(plan.confirm),
        "digest": plan_digest(text),
        "plan": diff_to_dict(plan.diff),
        "plan_text": text,
        "start": list(plan.start),
        "restart": list(plan.restart),
        "stop": list(plan.stop),
    }
