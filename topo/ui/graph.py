"""The program drawn for the dashboard: the SVG ``topo graph --svg`` draws (the same view
of the IR, the same collapsing of groups), with the groups the page expanded drawn
replica by replica, and which IR nodes each drawn box stands for, so the page can
colour boxes by their nodes' live states and count them (``actor ×64: 63 running, 1
restarting``).

A collapsed box gets one more label line, a placeholder as wide as the counts usually
are: the page writes the counts there. Drawings are cached per set of expanded groups.
"""

from __future__ import annotations

import dataclasses
import threading
from typing import Any

from topo.ir import Program
from topo.render import GraphvizError, ViewOptions, build_view, render, to_dot

COUNTS_PLACEHOLDER = "000 running, 000 restarting"
MAX_CACHED = 16


class Drawings:
    """SVG drawings of one program, by the groups expanded."""

    def __init__(self, program: Program) -> None:
        self.program = program
        self._lock = threading.Lock()
        self._cache: dict[frozenset[str], dict[str, Any]] = {}

    def drawing(self, expanded: frozenset[str] = frozenset()) -> dict[str, Any]:
        """``{"svg", "members", "groups", "collapsed"}`` for the groups ``expanded``;
        ``svg`` is None (and ``error`` says why) when Graphviz cannot draw it."""
        expanded = frozenset(g for g in expanded if g in self.program.group_index)
        with self._lock:
            found = self._cache.get(expanded)
        if found is not None:
            return found
        made = self._draw(expanded)
        with self._lock:
            if len(self._cache) >= MAX_CACHED:
                self._cache.pop(next(iter(self._cache)))
            self._cache[expanded] = made
        return made

    def _draw(self, expanded: frozenset[str]) -> dict[str, Any]:
        view = build_view(self.program, ViewOptions(expanded=expanded))
        for key, node in list(view.nodes.items()):
            if node.collapsed:
                detail = (
                    f"{node.detail}\n{COUNTS_PLACEHOLDER}" if node.detail else COUNTS_PLACEHOLDER
                )
                view.nodes[key] = dataclasses.replace(node, detail=detail)
        out: dict[str, Any] = {
            "members": view.members,
            "groups": {k: n.group for k, n in view.nodes.items()},
            "collapsed": sorted(k for k, n in view.nodes.items() if n.collapsed),
            "expanded": sorted(expanded),
            "svg": None,
        }
        try:
            svg = render(to_dot(view), "svg").decode("utf-8")
        except GraphvizError as exc:
            out["error"] = str(exc)
            return out
        start = svg.find("<svg")  # without the XML prolog and doctype: inline in the page
        out["svg"] = svg[start:] if start >= 0 else svg
        return out
