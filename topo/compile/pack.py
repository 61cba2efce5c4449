"""Colocation: packing nodes into executables (the unit a backend starts)."""

from __future__ import annotations

from dataclasses import dataclass, field

from topo.compile.refs import GroupTable, RefError
from topo.diagnostics import Diagnostic
from topo.ir import Executable, Group
from topo.loader.models import ColocationSpec
from topo.syntax.source import SourceMap


@dataclass
class Packing:
    """Executables in start order, and node id -> executable id."""

    executables: list[Executable]
    node_exe: dict[str, str]


def _set_name(spec: ColocationSpec, members: list[str]) -> str:
    if spec.name:
        return spec.name
    groups: list[str] = []
    for node in members:
        group = node.split("/")[0]
        if group not in groups:
            groups.append(group)
    return "+".join(groups)


@dataclass
class _Sets:
    """What the colocation list asks for: thread sets and host placements, by node."""

    thread_set: dict[str, str] = field(default_factory=dict)  # node -> thread set name
    members: dict[str, list[str]] = field(default_factory=dict)  # thread set -> nodes
    placement: dict[str, str] = field(default_factory=dict)  # node -> host set name


def pack(
    groups: list[Group],
    table: GroupTable,
    colocation: list[ColocationSpec],
    sources: SourceMap,
    errors: list[Diagnostic],
) -> Packing:
    """Thread sets first, then per-process chunks, then one executable per remaining node."""
    sets = _Sets()
    for i, spec in enumerate(colocation):
        _add_set(i, spec, groups, table, sources, sets, errors)
    executables, node_exe = _executables(groups, table, sets)
    placed = _place(executables, node_exe, sets.placement, sources, errors)
    _check_spread(groups, sets.placement, sources, errors)
    _check_unique(placed, sources, errors)
    return Packing(placed, node_exe)


def _add_set(
    i: int,
    spec: ColocationSpec,
    groups: list[Group],
    table: GroupTable,
    sources: SourceMap,
    sets: _Sets,
    errors: list[Diagnostic],
) -> None:
    """Record colocation entry ``i``: resolve its nodes, refuse overlaps and double packing."""
    members: list[str] = []
    for j, entry in enumerate(spec.nodes):
        where = sources.pos(("colocation", i, "nodes", j))
        try:
            members.extend(table.resolve_nodes(entry))
        except RefError as exc:
            errors.append(Diagnostic(str(exc), where, exc.hint))
    if not members:
        return
    name = _set_name(spec, members)
    if spec.mode == "threads" and name in sets.members:
        errors.append(
            Diagnostic(
                f"two thread colocation sets are named '{name}'",
                sources.pos(("colocation", i)),
                "give each set its own name: field",
            )
        )
        return
    taken = sets.thread_set if spec.mode == "threads" else sets.placement
    for node in members:
        if node in taken:
            errors.append(
                Diagnostic(
                    f"node '{node}' is in two {spec.mode} colocation sets "
                    f"('{taken[node]}' and '{name}')",
                    sources.pos(("colocation", i, "nodes")),
                    "a node can be packed into only one process"
                    if spec.mode == "threads"
                    else "a node can be placed with only one host set",
                )
            )
            continue
        taken[node] = name
    if spec.mode != "threads":
        return
    group_of = {g.name: g for g in groups}
    for node in members:
        g = group_of[node.split("/")[0]]
        if g.per_process is not None:
            errors.append(
                Diagnostic(
                    f"group '{g.name}' packs its replicas with colocate.per_process and "
                    f"also appears in colocation set '{name}'",
                    sources.pos(("colocation", i, "nodes")),
                    "use one or the other for a group",
                )
            )
            break
    sets.members.setdefault(name, []).extend(n for n in members if sets.thread_set.get(n) == name)


def _executables(
    groups: list[Group], table: GroupTable, sets: _Sets
) -> tuple[list[Executable], dict[str, str]]:
    """Executables in group order: per-process chunks, thread sets (where their first member
    stands), and one executable per remaining node."""
    executables: list[Executable] = []
    node_exe: dict[str, str] = {}
    emitted_sets: set[str] = set()
    for group in groups:
        ids = table.node_ids.get(group.name, ())
        k = group.per_process
        if k is not None:
            for start in range(0, len(ids), k):
                chunk = ids[start : start + k]
                last = start + len(chunk) - 1
                exe_id = chunk[0] if len(chunk) == 1 else f"{group.name}/{start}-{last}"
                executables.append(Executable(exe_id, tuple(chunk), "replicas"))
                node_exe.update({n: exe_id for n in chunk})
            continue
        for node in ids:
            set_name = sets.thread_set.get(node)
            if set_name is None:
                executables.append(Executable(node, (node,), "single"))
                node_exe[node] = node
            elif set_name not in emitted_sets:
                emitted_sets.add(set_name)
                together = tuple(sets.members[set_name])
                executables.append(Executable(set_name, together, "set"))
                node_exe.update({n: set_name for n in together})
    return executables, node_exe


def _place(
    executables: list[Executable],
    node_exe: dict[str, str],
    placement: dict[str, str],
    sources: SourceMap,
    errors: list[Diagnostic],
) -> list[Executable]:
    """Host placement: every executable holding a node of a host set gets its name."""
    exe_placement: dict[str, str] = {}
    for node, name in placement.items():
        exe = node_exe.get(node)
        if exe is None:
            continue
        if exe_placement.get(exe, name) != name:
            errors.append(
                Diagnostic(
                    f"executable '{exe}' would have to run on two host sets "
                    f"('{exe_placement[exe]}' and '{name}')",
                    sources.pos(("colocation",)),
                )
            )
            continue
        exe_placement[exe] = name
    return [Executable(e.id, e.nodes, e.mode, exe_placement.get(e.id)) for e in executables]


def _check_spread(
    groups: list[Group], placement: dict[str, str], sources: SourceMap, errors: list[Diagnostic]
) -> None:
    """A spread group's processes go to distinct hosts: none of its nodes may be in a
    host-colocation set as well (the set's host would decide for it)."""
    for g in groups:
        if not g.resources.spread:
            continue
        placed = sorted({name for node, name in placement.items() if node.split("/")[0] == g.name})
        if placed:
            errors.append(
                Diagnostic(
                    f"group '{g.name}' sets resources.spread, so each of its processes picks "
                    f"its own host, but nodes of it are in host-colocation set "
                    f"{', '.join(repr(p) for p in placed)}",
                    sources.pos(("nodes", g.name, "resources", "spread")),
                    "drop spread, or take the group's nodes out of the `mode: host` set",
                )
            )


def _check_unique(
    executables: list[Executable], sources: SourceMap, errors: list[Diagnostic]
) -> None:
    seen: dict[str, int] = {}
    for e in executables:
        seen[e.id] = seen.get(e.id, 0) + 1
    for exe_id, times in seen.items():
        if times > 1:
            errors.append(
                Diagnostic(
                    f"two executables would be named '{exe_id}'",
                    sources.pos(("colocation",)),
                    "give the colocation set a name (name: ...) that differs from every node id",
                )
            )
