"""The dashboard's JSON API, as plain functions of a run directory and a request's
parameters (``server`` does the HTTP): the run and its program, the drawing, a node's
process, logs and metrics, the runs of this machine (for curves side by side), and the
actions, which go to the launcher over the run's control channel."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

from topo.runs import index
from topo.runs.control import ControlError, request
from topo.runs.probe import probe
from topo.ui import files
from topo.ui.graph import Drawings
from topo.ui.procinfo import process_figures
from topo.ui.reader import RunReader

ACTIONS = ("stop", "restart", "snapshot")
ACTION_TIMEOUT_S = {"stop": 10.0, "restart": 330.0, "snapshot": 900.0}  # restart: a save()
BY = "the dashboard"


class BadRequest(Exception):
    """A request the API cannot answer (unknown node, missing parameter): status 400
    with the message."""


class Api:
    """The answers for one run (``reader``) and its program's drawings."""

    def __init__(self, reader: RunReader) -> None:
        self.reader = reader
        self._drawings = Drawings(reader.program())
        self._lock = threading.Lock()
        # the first page asks for the default drawing: have it ready (Graphviz takes a while)
        threading.Thread(target=self._drawings.drawing, name="topo-ui-draw", daemon=True).start()

    @property
    def drawings(self) -> Drawings:
        """The drawings of the run's program as it is now (``topo apply`` changes it)."""
        program = self.reader.program()
        with self._lock:
            if self._drawings.program is not program:
                self._drawings = Drawings(program)
            return self._drawings

    # -- the run ------------------------------------------------------------------
    def run(self) -> dict[str, Any]:
        """The run, its nodes now and its program's groups (the page's first load)."""
        snap = self.reader.status()
        program = self.reader.program()
        groups = [
            {
                "name": g.name,
                "kind": g.kind,
                "target": g.target,
                "count": g.count,
                "restart": g.restart.policy,
                "max_restarts": g.restart.max_restarts,
                "description": g.description,
            }
            for g in program.groups
            if g.enabled
        ]
        return {
            "run_dir": str(self.reader.run_dir),
            "state": snap.state,
            "version": snap.version,
            "run": snap.run,
            "nodes": list(snap.nodes.values()),
            "groups": groups,
            "edges": len(program.edges),
            "actions": snap.control is not None,
            "now": time.time(),
        }

    def graph(self, expand: str) -> dict[str, Any]:
        """The drawing of the run's program now with the groups named in ``expand``
        (comma-separated) expanded, and the run's ``generation`` it was read at (the page
        draws again when the run's generation moves past it)."""
        generation = self.reader.status().run.get("generation")
        drawing = self.drawings.drawing(frozenset(g for g in expand.split(",") if g))
        return {**drawing, "generation": generation}

    def _node(self, node: str) -> dict[str, Any]:
        found = self.reader.status().nodes.get(node)
        if found is None:
            raise BadRequest(f"the run has no node {node!r}")
        return found

    def process(self, node: str) -> dict[str, Any]:
        """CPU and memory of the node's process (or ``remote``)."""
        entry = self._node(node)
        snap = self.reader.status()
        return process_figures(
            entry.get("pid") if entry.get("state") in ("starting", "running") else None,
            entry.get("host"),
            snap.run.get("launcher") or {},
            str(snap.run.get("backend") or ""),
        )

    # -- logs and metrics ------------------------------------------------------------
    def logs(self, node: str, offset: str, search: str, tail: str) -> dict[str, Any]:
        """The node's last lines, its lines since ``offset``, or those matching ``search``."""
        self._node(node)
        run_dir = self.reader.run_dir
        if search:
            return files.log_search(run_dir, node, search)
        if offset:
            return files.log_since(run_dir, node, _int(offset, "offset"))
        return files.log_tail(run_dir, node, min(_int(tail or "500", "tail"), 5000))

    def metrics(self, run: str, offsets: str) -> dict[str, Any]:
        """Metric rows of this run (or of ``run``, another run of this machine) from the
        offsets given (``name:offset,...``)."""
        run_dir = self.reader.run_dir if not run else self._other_run(run)
        table: dict[str, int] = {}
        for part in offsets.split(","):
            name, _, value = part.rpartition(":")
            if name:
                table[name] = _int(value, "offsets")
        return {"files": files.metric_rows(run_dir, table)}

    def _other_run(self, run_id: str) -> Path:
        for listed, run_dir in index.entries():
            if listed == run_id:
                return run_dir
        raise BadRequest(f"no run {run_id!r} on this machine")

    def runs(self) -> dict[str, Any]:
        """The runs of this machine's index, newest first, for curves side by side."""
        rows = []
        for run_id, run_dir in index.entries():
            info = probe(run_dir, run_id)
            rows.append(
                {
                    "id": run_id,
                    "name": info.name,
                    "state": info.state,
                    "started": info.started,
                    "this": run_dir.resolve() == self.reader.run_dir.resolve(),
                }
            )
        rows.sort(key=lambda r: r["started"] or 0.0, reverse=True)
        return {"runs": rows[:100]}

    # -- actions ----------------------------------------------------------------------
    def act(self, body: Any) -> dict[str, Any]:
        """Carry out an action the page confirmed: ``{"op": "stop"|"restart"|"snapshot",
        "node": ..., "confirmed": true}``, over the run's control channel."""
        if not isinstance(body, dict) or body.get("op") not in ACTIONS:
            raise BadRequest(f"an action is one of {', '.join(ACTIONS)}")
        if body.get("confirmed") is not True:
            raise BadRequest("the action was not confirmed")
        op = str(body["op"])
        message: dict[str, Any] = {"op": op, "by": BY}
        if op == "restart":
            message["node"] = self._node(str(body.get("node") or ""))["id"]
        snap = self.reader.status(0.0)
        if snap.control is None:
            return {"ok": False, "error": f"the run is {snap.state}: no action is possible"}
        try:
            return request(self.reader.run_dir, snap.control, message, ACTION_TIMEOUT_S[op])
        except ControlError as exc:
            return {"ok": False, "error": str(exc)}


def _int(text: str, name: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise BadRequest(f"{name} must be a whole number, not {text!r}") from None
    if value < 0:
        raise BadRequest(f"{name} must not be negative")
    return value
