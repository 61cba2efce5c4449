"""The run's Ray placement groups: every executable's resources reserved on a Ray node
before anything starts, and which node holds each executable's bundle.

One STRICT_PACK group per host-colocation set and one STRICT_SPREAD group per spread
group (``placement.units``), and one SPREAD group with a bundle for every other
executable: Ray balances those over the nodes, and one request for all of them is far
faster than one per executable. An executable runs on the node of its bundle: forked
there by the node's agent, or in an actor scheduled into the bundle. When a node dies,
Ray moves its bundles to live nodes that fit; ``refresh`` reads where they went.
"""

from __future__ import annotations

import time
from typing import Any

from topo.backends.ray.placement import demand, units
from topo.ir import Program

PLACEMENT_TIMEOUT_S = 60.0  # a placement the check found feasible is ready by then
REST = "*"  # the name of the SPREAD group of the executables placed by Ray alone


class Reservations:
    """The placement groups of one run (see the module's docstring)."""

    def __init__(self, program: Program, namespace: str) -> None:
        self.program = program
        self.namespace = namespace
        self.groups: list[Any] = []
        self._plan: list[tuple[str, str, list[str]]] = []  # (name, strategy, executables)
        self._slots: dict[str, tuple[int, int]] = {}  # exe -> (group index, bundle index)
        self._nodes: dict[str, str] = {}  # exe -> the Ray node id of its bundle, as read

    def reserve(self, timeout_s: float = PLACEMENT_TIMEOUT_S) -> None:
        """Create every placement group and wait until Ray placed them all (raises
        ``RuntimeError`` naming what it could not place in time)."""
        from ray.util.placement_group import placement_group

        rest: list[str] = []
        for unit in units(self.program):
            if unit.strategy is None:
                rest.extend(unit.exes)
            else:
                self._plan.append((unit.name, unit.strategy, list(unit.exes)))
        if rest:
            self._plan.append((REST, "SPREAD", rest))
        for name, strategy, exes in self._plan:
            bundles = [demand(self.program, e) for e in exes]
            group = placement_group(bundles, strategy=strategy, name=f"{self.namespace}/{name}")
            for index, exe in enumerate(exes):
                self._slots[exe] = (len(self.groups), index)
            self.groups.append(group)
        end = time.monotonic() + timeout_s
        for (name, strategy, exes), group in zip(self._plan, self.groups, strict=True):
            if not group.wait(max(0.0, end - time.monotonic())):
                raise RuntimeError(_not_placed(name, strategy, len(exes), timeout_s))
        self.refresh()

    def refresh(self) -> None:
        """Read again which node holds each bundle (after a node died)."""
        from ray.util.placement_group import placement_group_table

        tables = [placement_group_table(g).get("bundles_to_node_id", {}) for g in self.groups]
        for exe, (group, bundle) in self._slots.items():
            self._nodes[exe] = str(tables[group].get(bundle, "") or "")

    def node_of(self, exe: str) -> str | None:
        """The Ray node id (hex) holding ``exe``'s bundle, as last read; None: unplaced."""
        return self._nodes.get(exe) or None

    def slot(self, exe: str) -> tuple[Any, int]:
        """``exe``'s placement group and bundle index (to schedule an actor into it)."""
        group, bundle = self._slots[exe]
        return self.groups[group], bundle

    def remove(self) -> None:
        """Release every placement group (what Ray reserved for the run)."""
        from ray.util.placement_group import remove_placement_group

        for group in self.groups:
            try:
                remove_placement_group(group)
            except Exception:  # Ray is going away: it releases them itself
                pass
        self.groups.clear()


def _not_placed(name: str, strategy: str, count: int, timeout_s: float) -> str:
    if strategy == "STRICT_PACK":
        what = f"{name!r} on one node"
    elif strategy == "STRICT_SPREAD":
        what = f"{name!r} one process per node"
    else:
        what = f"the resources of {count} executable(s)"
    return (
        f"Ray could not place {what} within {timeout_s:g}s (the cluster's free resources "
        "may be taken by other jobs)"
    )
