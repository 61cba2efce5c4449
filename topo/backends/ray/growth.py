"""The placement groups a change to a running program (``topo apply``) adds on Ray, and
whether the cluster's free resources can hold them now.

Only what the change adds gets a bundle: the new executables, and those it keeps whose
demand changed (``additions``); every running executable keeps its own, so nothing that
runs is disturbed. The new bundles follow the rules of the start (``placement``), around
what runs: a host-colocation set that gains members gets them on the Ray node its running
members hold (a bundle label selector on ``ray.io/node-id``), a spread group's new
processes go to Ray nodes that run none of its processes (``!in(...)`` of those nodes,
STRICT_SPREAD among themselves), a new set is one STRICT_PACK group, and the rest one
SPREAD group for the change. ``plan_growth`` simulates them on the live nodes' *free*
resources (the running program's bundles are taken already) and says what cannot fit,
since Ray would wait for ever. Pure: no Ray calls here.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field

from topo.backends.ray.placement import Bundle, demand, describe, fits, total, units
from topo.diagnostics import Diagnostic, SourcePos
from topo.ir import Program

NODE_LABEL = "ray.io/node-id"  # the label every Ray node carries: its id


@dataclass(frozen=True)
class Request:
    """One placement group a change adds: a bundle per executable, in order, and the
    label selectors that keep each bundle where it must go (none: anywhere)."""

    name: str
    strategy: str
    exes: tuple[str, ...]
    selectors: tuple[dict[str, str], ...] = field(default=())


def _unit_of(program: Program) -> dict[str, tuple[str | None, str | None]]:
    """Executable -> the host set or spread group it is placed with (None, None: alone)."""
    return {e: (u.host_set, u.spread) for u in units(program) for e in u.exes}


def additions(running: Program, program: Program) -> list[str]:
    """The executables of ``program`` that need a bundle: the new ones, and the kept ones
    whose demand or placement (host set, spread) changed: they restart into the new one."""
    old = running.executable_index
    was, will = _unit_of(running), _unit_of(program)
    return [
        e.id
        for e in program.executables
        if e.id not in old
        or demand(running, e.id) != demand(program, e.id)
        or was[e.id] != will[e.id]
    ]


def _take(free: dict[str, Bundle], node: str, need: Mapping[str, float]) -> None:
    for key, amount in need.items():
        free[node][key] = free[node].get(key, 0.0) - amount


def _roomiest(
    need: Mapping[str, float], free: Mapping[str, Bundle], avoid: Collection[str] = ()
) -> str | None:
    """The node (not in ``avoid``) with the most free CPU that can hold ``need`` now."""
    able = [n for n, have in free.items() if n not in avoid and fits(need, have)]
    return max(able, key=lambda n: free[n].get("CPU", 0.0), default=None)


def plan_growth(
    program: Program,
    adding: Sequence[str],
    node_of: Mapping[str, str | None],
    free: Mapping[str, Mapping[str, float]],
    ips: Mapping[str, str],
) -> tuple[list[Request], list[Diagnostic]]:
    """The placement groups for the executables ``adding`` of ``program`` (``node_of``:
    the Ray node of each running executable's bundle; ``free``: each live node's free
    resources; ``ips``: node id -> address, for messages), and an error per unit that
    the free resources cannot hold."""
    room = {n: dict(b) for n, b in free.items()}
    wanted = set(adding)
    requests: list[Request] = []
    errors: list[Diagnostic] = []
    rest: list[str] = []
    for unit in units(program):
        new = [e for e in unit.exes if e in wanted]
        if not new:
            continue
        bundles = [demand(program, e) for e in new]
        there = [n for e in unit.exes if e not in wanted and (n := node_of.get(e))]
        pos = program.group_of(program.executable_index[new[0]].nodes[0]).origin
        if unit.host_set is not None:
            need = total(bundles)
            node = Counter(there).most_common(1)[0][0] if there else _roomiest(need, room)
            if node is None or node not in room or not fits(need, room[node]):
                errors.append(
                    _no_room_for_set(unit.host_set, new, need, node, there, room, ips, pos)
                )
                continue
            _take(room, node, need)
            pinned = tuple({NODE_LABEL: node} for _ in new) if there else ()
            requests.append(Request(unit.host_set, "STRICT_PACK", tuple(new), pinned))
        elif unit.spread is not None:
            avoid = set(there)
            for bundle in bundles:
                node = _roomiest(bundle, room, avoid)
                if node is None:
                    errors.append(_no_room_to_spread(unit.spread, new, bundles, there, free, pos))
                    break
                avoid.add(node)
                _take(room, node, bundle)
            else:
                apart = f"!in({','.join(sorted(set(there)))})"
                selectors = tuple({NODE_LABEL: apart} for _ in new) if there else ()
                requests.append(Request(unit.spread, "STRICT_SPREAD", tuple(new), selectors))
        else:
            for exe, bundle in zip(new, bundles, strict=True):
                node = _roomiest(bundle, room)
                if node is None:
                    errors.append(_no_room(exe, unit.groups, bundle, free, ips, pos))
                    continue
                _take(room, node, bundle)
                rest.append(exe)
    if rest and not errors:
        requests.append(Request("*", "SPREAD", tuple(rest)))
    return requests, errors


def free_text(free: Mapping[str, Mapping[str, float]], ips: Mapping[str, str]) -> str:
    """Each live node's free CPU (and GPU), for a message."""
    parts = []
    for node, have in free.items():
        gpus = f", {have.get('GPU', 0.0):g} GPU" if have.get("GPU") else ""
        parts.append(f"{ips.get(node, node[:8])}: {have.get('CPU', 0.0):g} CPU{gpus}")
    return "; ".join(parts) or "no live node"


_LATER = (
    "the resources of what a change removes are free only once it ended, after the new "
    "executables started: remove it in one change, add in the next"
)


def _no_room_for_set(
    name: str,
    new: list[str],
    need: Bundle,
    node: str | None,
    there: list[str],
    room: Mapping[str, Bundle],
    ips: Mapping[str, str],
    pos: SourcePos | None,
) -> Diagnostic:
    if there and node is not None:
        return Diagnostic(
            f"host-colocation set {name!r} runs on Ray node {ips.get(node, node[:8])}, which "
            f"has not {describe(need)} free for its new executable(s) {', '.join(new)}",
            pos,
            "a set's processes share one node: free resources there, or give the new "
            "nodes a colocation set of their own",
        )
    return Diagnostic(
        f"host-colocation set {name!r}: no live Ray node has {describe(need)} free for it",
        pos,
        f"free now: {free_text(room, ips)}; {_LATER}",
    )


def _no_room_to_spread(
    group: str,
    new: list[str],
    bundles: list[Bundle],
    there: list[str],
    free: Mapping[str, Mapping[str, float]],
    pos: SourcePos | None,
) -> Diagnostic:
    need = {k: max(b.get(k, 0.0) for b in bundles) for b in bundles for k in b}
    held = set(there)
    able = sum(1 for n, have in free.items() if n not in held and fits(need, have))
    return Diagnostic(
        f"group {group!r} sets resources.spread: its {len(new)} new process(es) need Ray "
        f"nodes of their own that have {describe(need)} free, beside the {len(held)} "
        f"its running processes are on, and the cluster has {able}",
        pos,
        "add nodes, lower the group's count, or drop spread",
    )


def _no_room(
    exe: str,
    groups: Sequence[str],
    bundle: Bundle,
    free: Mapping[str, Mapping[str, float]],
    ips: Mapping[str, str],
    pos: SourcePos | None,
) -> Diagnostic:
    names = ", ".join(repr(g) for g in groups)
    return Diagnostic(
        f"group {names}: no live Ray node has {describe(bundle)} free for {exe} (what "
        "runs keeps its reserved resources)",
        pos,
        f"ask for fewer resources.cpus/gpus or add nodes (free now: {free_text(free, ips)}); "
        + _LATER,
    )
