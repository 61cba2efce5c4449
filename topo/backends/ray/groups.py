"""The run's Ray placement groups: every executable's resources reserved on a Ray node
before anything starts, and which node holds each executable's bundle.

One STRICT_PACK group per host-colocation set and one STRICT_SPREAD group per spread
group (``placement.units``), and one SPREAD group with a bundle for every other
executable: Ray balances those over the nodes, and one request for all of them is far
faster than one per executable. An executable runs on the node of its bundle: forked
there by the node's agent, or in an actor scheduled into the bundle. When a node dies,
Ray moves its bundles to live nodes that fit; ``refresh`` reads where they went.

A change to the running program (``topo apply``) adds placement groups for what it adds
only (``add``, planned by ``growth``), and never touches a group whose bundles running
executables hold. An executable that leaves the program, or moves to a new bundle
because its demand changed, gives up its old one once its attempt ended (``vacated``);
a placement group is removed when no executable holds a bundle of it any more (Ray
cannot shrink one: until then the bundle stays reserved).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable
from typing import Any

from topo.backends.ray.growth import Request
from topo.backends.ray.placement import demand, units
from topo.ir import Program

PLACEMENT_TIMEOUT_S = 60.0  # a placement the check found feasible is ready by then
REST = "*"  # the name of the SPREAD group of the executables placed by Ray alone


class Reservations:
    """The placement groups of one run (see the module's docstring)."""

    def __init__(self, program: Program, namespace: str) -> None:
        self.program = program
        self.namespace = namespace
        self.groups: list[Any] = []  # None where a group was removed (indices stay)
        self._plan: list[tuple[str, str, list[str]]] = []  # (name, strategy, executables)
        self._slots: dict[str, tuple[int, int]] = {}  # exe -> (group index, bundle index)
        self._nodes: dict[str, str] = {}  # exe -> the Ray node id of its bundle, as read
        self._held: dict[int, set[str]] = {}  # group index -> executables holding a bundle
        self._vacating: dict[str, int] = {}  # exe -> group of the bundle it gives up at its end
        self._changes = 0
        self._lock = threading.Lock()

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
            self._held[len(self.groups)] = set(exes)
            self.groups.append(group)
        end = time.monotonic() + timeout_s
        for (name, strategy, exes), group in zip(self._plan, self.groups, strict=True):
            if not group.wait(max(0.0, end - time.monotonic())):
                raise RuntimeError(_not_placed(name, strategy, len(exes), timeout_s))
        self.refresh()

    def refresh(self) -> None:
        """Read again which node holds each bundle (after a node died)."""
        from ray.util.placement_group import placement_group_table

        with self._lock:
            groups, slots = list(self.groups), dict(self._slots)
        tables = [
            {} if g is None else placement_group_table(g).get("bundles_to_node_id", {})
            for g in groups
        ]
        for exe, (group, bundle) in slots.items():
            self._nodes[exe] = str(tables[group].get(bundle, "") or "")

    def nodes(self) -> dict[str, str]:
        """Executable -> the Ray node id of its bundle, as last read."""
        return {e: n for e, n in self._nodes.items() if n}

    def add(
        self, program: Program, requests: list[Request], timeout_s: float = PLACEMENT_TIMEOUT_S
    ) -> None:
        """Create a change's placement groups (``growth.plan_growth``) and wait until Ray
        placed them; their executables' bundles are there from now on (an old bundle is
        given up when its attempt ends, ``vacated``). Raises ``RuntimeError`` naming what
        Ray could not place in time, and then reserves nothing."""
        from ray.util.placement_group import placement_group, remove_placement_group

        self._changes += 1
        made = []
        for r in requests:
            selectors = {"bundle_label_selector": list(r.selectors)} if r.selectors else {}
            bundles = [demand(program, e) for e in r.exes]
            name = f"{self.namespace}/{r.name}#{self._changes}"
            made.append(placement_group(bundles, strategy=r.strategy, name=name, **selectors))
        end = time.monotonic() + timeout_s
        for r, group in zip(requests, made, strict=True):
            if not group.wait(max(0.0, end - time.monotonic())):
                for g in made:
                    remove_placement_group(g)
                raise RuntimeError(_not_placed(r.name, r.strategy, len(r.exes), timeout_s))
        with self._lock:
            self.program = program
            for r, group in zip(requests, made, strict=True):
                index = len(self.groups)
                self.groups.append(group)
                self._held[index] = set(r.exes)
                for bundle, exe in enumerate(r.exes):
                    old = self._slots.get(exe)
                    if old is not None:
                        self._vacating[exe] = old[0]
                    self._slots[exe] = (index, bundle)
        self.refresh()

    def leave(self, exes: Iterable[str], ended: Iterable[str] = ()) -> None:
        """These executables left the program: their bundles are given up when their
        attempts end (``vacated``); at once for those in ``ended`` (none runs)."""
        with self._lock:
            for exe in exes:
                slot = self._slots.pop(exe, None)
                self._nodes.pop(exe, None)
                if slot is not None:
                    self._vacating[exe] = slot[0]
        for exe in ended:
            self.vacated(exe)

    def vacated(self, exe: str) -> None:
        """An attempt of ``exe`` ended: a bundle it was giving up is given up, and its
        placement group removed once no executable holds a bundle of it."""
        from ray.util.placement_group import remove_placement_group

        with self._lock:
            index = self._vacating.pop(exe, None)
            if index is None:
                return
            held = self._held.get(index, set())
            held.discard(exe)
            group = self.groups[index] if not held else None
            if group is not None:
                self.groups[index] = None
        if group is not None:
            try:
                remove_placement_group(group)
            except Exception:  # Ray is going away: it releases it itself
                pass

    def vacating(self) -> set[str]:
        """The executables that give up a bundle when their attempt ends."""
        with self._lock:
            return set(self._vacating)

    def node_of(self, exe: str) -> str | None:
        """The Ray node id (hex) holding ``exe``'s bundle, as last read; None: unplaced."""
        return self._nodes.get(exe) or None

    def slot(self, exe: str) -> tuple[Any, int]:
        """``exe``'s placement group and bundle index (to schedule an actor into it)."""
        with self._lock:
            group, bundle = self._slots[exe]
            return self.groups[group], bundle

    def remove(self) -> None:
        """Release every placement group (what Ray reserved for the run)."""
        from ray.util.placement_group import remove_placement_group

        with self._lock:
            groups = [g for g in self.groups if g is not None]
            self.groups.clear()
        for group in groups:
            try:
                remove_placement_group(group)
            except Exception:  # Ray is going away: it releases them itself
                pass


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
